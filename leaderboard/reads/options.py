"""A page's long <select> lists (a kernel's siblings, a run's comparable runs, the review queue's
models: hundreds of options), made in Python: a template loop took about 0.2 ms an option, 100 ms for the kernel page's 500."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape  # Django's escape writes the same five entities, at several times the cost a call

from django.utils.safestring import SafeString, mark_safe


def select_options(choices: Iterable[tuple[int, str]], selected: int | None) -> SafeString:
    """`<option>`s of (primary key, label) pairs, `selected` marked; every label escaped."""
    options = (
        f'<option value="{int(pk)}"{" selected" if pk == selected else ""}>{escape(label)}</option>'
        for pk, label in choices
    )
    return mark_safe("".join(options))  # noqa: S308 - every label escaped above; keys are integers


def text_options(choices: Iterable[tuple[object, str]], selected: object) -> SafeString:
    """`<option>`s of (value, label) pairs of any kind (a form's choices), the one whose value reads
    as `selected` marked (none when it is None); every value and label escaped."""
    chosen = None if selected is None else str(selected)
    options = (
        f'<option value="{escape(text)}"{" selected" if text == chosen else ""}>{escape(str(label))}</option>'
        for text, label in ((str(value), label) for value, label in choices)
    )
    return mark_safe("".join(options))  # noqa: S308 - every value and label escaped above
