"""Which characters text that names things may hold: the one rule for model, lab, run and
hardware names and settings, reported-score cells and the like (issue 19 case 13: a model named
with terminal escape sequences retitled and cleared the terminal of whoever listed it).

Refused: C0 controls (ESC, NUL, BEL, CR...), DEL and the C1 controls (CSI U+009B acts like ESC [
on many terminals), the bidirectional overrides, embeddings and isolates (text that reads in
another order than it is stored), and the Unicode line and paragraph separators. Multi-line text
(notes) may hold tab, line feed and carriage return.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import models

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
ONE_LINE_FORBIDDEN = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\u2028\u2029]")
MULTI_LINE_FORBIDDEN = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}\u2028\u2029]")


def control_character(text: str, multiline: bool = False) -> str | None:
    """The first forbidden character of `text` as U+XXXX, or None when there is none."""
    found = (MULTI_LINE_FORBIDDEN if multiline else ONE_LINE_FORBIDDEN).search(text)
    return f"U+{ord(found.group()):04X}" if found else None


def control_character_problem(text: str, multiline: bool = False) -> str | None:
    """"contains a control character (U+001B)", or None: the message every refusal uses."""
    found = control_character(text, multiline)
    return f"contains a control character ({found})" if found else None


def one_line_text(value: str) -> None:
    """A Django validator: the admin's forms use it for every one-line field (PLAIN_TEXT_FIELDS)."""
    if isinstance(value, str) and (problem := control_character_problem(value)):
        raise ValidationError(problem[0].upper() + problem[1:] + ".", code="control_character")


# ModelAdmin.formfield_overrides for the admins where names and settings are typed in.
PLAIN_TEXT_FIELDS = {models.CharField: {"validators": [one_line_text]}}
