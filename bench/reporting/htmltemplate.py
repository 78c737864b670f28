"""The HTML report's template, `templates/page.html.j2` (with its style sheet `page.css` and script `page.js`,
inlined into the page): the page's structure in one file, filled from plain data, as pandas' `Styler.to_html`
fills its `html.tpl`. Jinja2 escapes every value; HTML a macro made (a table inside a section) is passed on as
`Markup`. The script sorts tables and saves their rows as CSV (see page.js); nothing is fetched by the page."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

TEMPLATES = Path(__file__).with_name("templates")
PAGE = "page.html.j2"
CSS = "\n" + (TEMPLATES / "page.css").read_text(encoding="utf-8")
SCRIPT = "\n" + (TEMPLATES / "page.js").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def macros() -> Any:
    """The template's macros (page, header, table, figure, note, notes, badge), as callables."""
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                                     undefined=jinja2.StrictUndefined)
    return environment.get_template(PAGE).module


def safe(html: str) -> Markup:
    """HTML made by the template's macros (or by the page's own builders), to be inserted as it is."""
    return Markup(html)


def render(macro: str, *args: Any, **kwargs: Any) -> str:
    """The HTML of one macro of the template, as a plain string."""
    return str(getattr(macros(), macro)(*args, **kwargs))
