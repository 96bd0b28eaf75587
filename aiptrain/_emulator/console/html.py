"""HTML built from Python values, escaped by default, and the frame every console page shares.

`Html` is text that is already markup; anything else given to `tag` or `join` is escaped, so a
job ID, a label or a log line can never become markup. Pages carry no inline script or style
(the content security policy forbids both): behaviour comes from `static/console.js`, looks from
`static/console.css`, and SVG charts use presentation attributes, which are not styles.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from aiptrain._emulator.console.assets import asset_url


class Html(str):
    """Markup, inserted as it is."""

    __slots__ = ()


def escape(value: object) -> Html:
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[object], separator: str = "") -> Html:
    return Html(separator.join(escape(part) for part in parts))


def tag(name: str, /, *children: object, **attributes: object) -> Html:
    """`<name attributes>children</name>`. `class_` is `class`, `data_x` is `data-x`; True is a bare
    attribute, None and False leave it out. Void elements (input, meta, link) take no children."""
    parts = [name]
    for key, value in attributes.items():
        if value is None or value is False:
            continue
        attribute = key.rstrip("_").replace("_", "-")
        parts.append(attribute if value is True else f'{attribute}="{escape(value)}"')
    opening = f"<{' '.join(parts)}>"
    if name in _VOID:
        return Html(opening)
    return Html(f"{opening}{join(children)}</{name}>")


_VOID = frozenset({"meta", "link", "input", "br", "hr", "img"})


def page(title: str, body: Html, *, csrf: str, projects: list[str], project: str | None) -> Html:
    """A whole document: the header (the project switcher) and `body`."""
    head = join([
        Html('<meta charset="utf-8">'),
        tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
        tag("meta", name="aiptrain-csrf", content=csrf),
        tag("title", f"{title} · aiptrain console"),
        tag("link", rel="icon", href=asset_url("favicon.svg")),
        tag("link", rel="stylesheet", href=asset_url("console.css")),
        tag("script", src=asset_url("console.js"), defer=True),
    ])
    header = tag("header", tag("a", "aiptrain", class_="brand", href="/console/"), project_switcher(projects, project))
    return Html(f"<!doctype html>\n{tag('html', tag('head', head), tag('body', header, tag('main', body)), lang='en')}")


def project_switcher(projects: list[str], current: str | None) -> Html:
    """A GET form to another project's jobs (console.js submits it on change)."""
    options = [tag("option", name, value=name, selected=name == current) for name in projects]
    if current is not None and current not in projects:
        options.insert(0, tag("option", current, value=current, selected=True))
    return tag("form", tag("label", "Project ", tag("select", *options, name="project", class_="autosubmit")),
               tag("noscript", tag("button", "Go")), class_="projects", method="get", action="/console/")


def state_badge(state: str) -> Html:
    return tag("span", state, class_=f"state state-{state.lower()}", data_state=state)


def definitions(rows: Iterable[tuple[str, object]]) -> Html:
    """A `<dl>` of the rows whose value is not empty."""
    items = [join([tag("dt", name), tag("dd", value)]) for name, value in rows if value not in (None, "", [])]
    return tag("dl", *items)
