"""The MCP Apps views' system checks, registered with the extension: ``mcp_django.ui.E001``, a view
that does not render; ``mcp_django.ui.E002``, a view that loads from an origin it does not declare
(or from a relative URL, which a sandboxed view cannot load).
"""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, register
from django.template import TemplateDoesNotExist, TemplateSyntaxError

from ..conf import mcp_settings
from . import origins, render
from .views import CSP_ARGUMENTS, views

_ARGUMENT = {kind: argument for argument, kind in CSP_ARGUMENTS.items()}


@register()
def check_views(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    if "mcp_django.mcp_ui.methods" not in mcp_settings.EXTENSIONS:
        return []
    problems: list[Any] = []
    for view in views.values():
        try:
            html = render.render(view)
        except TemplateDoesNotExist as exc:
            problems.append(
                Error(
                    f"the MCP Apps view {view.uri} has no template {view.template!r} ({exc})",
                    hint="create the template in an app's templates/ folder or a TEMPLATES DIRS entry",
                    id="mcp_django.ui.E001",
                )
            )
            continue
        except (TemplateSyntaxError, render.StaticFileMissing, ValueError) as exc:
            problems.append(
                Error(f"the MCP Apps view {view.uri} ({view.template}) does not render: {exc}", id="mcp_django.ui.E001")
            )
            continue
        for load in origins.undeclared(html, dict(view.csp)):
            if load.origin == "":
                message = f"the MCP Apps view {view.uri} ({view.template}) loads the relative URL {load.url!r}"
                hint = (
                    "a view runs in a sandboxed frame with no origin of the site's: inline it with {% mcp_app_inline %}"
                )
            else:
                message = (
                    f"the MCP Apps view {view.uri} ({view.template}) loads {load.url!r} from {load.origin}, "
                    f"which it does not declare: the host's CSP will block it"
                )
                hint = (
                    f"declare it: mcp_django.mcp_ui.view({view.template!r}, {_ARGUMENT[load.kind]}=[{load.origin!r}])"
                )
            problems.append(Error(message, hint=hint, id="mcp_django.ui.E002"))
    return problems
