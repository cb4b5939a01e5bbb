"""Reading a plan report without a browser: its elements as a tree of (tag, attrs, text)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "wbr"}
SVG_EMPTY = {"rect", "line", "path", "circle"}  # written as <x ...></x> or <x .../>


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    text: str = ""

    def iter(self, tag: str | None = None) -> list[Element]:
        found = [self] if tag in (None, self.tag) else []
        for child in self.children:
            found += child.iter(tag)
        return found

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)


class _Tree(HTMLParser):
    """Builds the tree and fails on a tag closed out of order (the page must be well formed)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        open_tag = self.stack.pop().tag
        assert open_tag == tag, f"</{tag}> closes <{open_tag}>"

    def handle_data(self, data: str) -> None:
        self.stack[-1].text += data


def parse(text: str) -> Element:
    tree = _Tree()
    tree.feed(text)
    tree.close()
    assert [e.tag for e in tree.stack] == ["#root"], "unclosed elements"
    return tree.root
