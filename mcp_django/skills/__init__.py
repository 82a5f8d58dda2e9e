"""Skills (SEP-2640, ``io.modelcontextprotocol/skills``): instructions and their files, served
from ``MCP_DJANGO["SKILLS_DIRS"]`` and each installed app's ``mcp_skills/``. See docs/skills.md.
"""
