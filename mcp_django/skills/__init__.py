"""Skills (SEP-2640, ``io.modelcontextprotocol/skills``): instructions and their files, served
from each installed app's ``mcp_skills/`` folder and ``MCP_DJANGO["SKILLS_DIRS"]``.

``library`` finds and digests them, ``manifest`` reads a SKILL.md's frontmatter, ``methods``
answers the extension's methods for the dispatcher. See docs/skills.md.
"""
