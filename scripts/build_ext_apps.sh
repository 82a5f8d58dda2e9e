#!/bin/sh
# The MCP Apps view script shipped in mcp_django/static/mcp_django/mcp_ui/ (docs/apps.md): the
# npm package @modelcontextprotocol/ext-apps's App (its app-with-deps build) as one classic script
# that defines the global McpApps, so a view inlines it with {% mcp_app_script %} and loads nothing.
# Pinned: tests/clients/package.json names the package's version and esbuild's.
set -eu
VERSION=2.0.4
here=$(cd "$(dirname "$0")/.." && pwd)
modules="$here/tests/clients/node_modules"
out="$here/mcp_django/static/mcp_django/mcp_ui"
installed=$(node -p "require('$modules/@modelcontextprotocol/ext-apps/package.json').version")
[ "$installed" = "$VERSION" ] || { echo "ext-apps $installed installed, $VERSION pinned" >&2; exit 1; }
"$modules/.bin/esbuild" "$modules/@modelcontextprotocol/ext-apps/dist/src/app-with-deps.js" \
    --bundle --format=iife --global-name=McpApps --minify --legal-comments=eof \
    --outfile="$out/ext-apps-$VERSION.js" --log-level=warning
cp "$modules/@modelcontextprotocol/ext-apps/LICENSE" "$out/ext-apps-$VERSION.LICENSE"
