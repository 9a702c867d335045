"""Which characters text that names things may hold: the one rule for model, lab, run and
hardware names and settings, reported-score cells and the like (issue 19 case 13: a model named
with terminal escape sequences retitled and cleared the terminal of whoever listed it).

Refused: C0 controls (ESC, NUL, BEL, CR...), DEL and the C1 controls (CSI U+009B acts like ESC [
on many terminals), the bidirectional overrides, embeddings and isolates (text that reads in
another order than it is stored), and the Unicode line and paragraph separators. Multi-line text
(notes, review notes, report reasons) may hold tab, line feed and carriage return.

One-line text (names) also refuses the invisible format characters, Unicode category Cf (zero-width
joiner U+200D, byte-order mark U+FEFF, the tag characters U+E0000-U+E007F, soft hyphen...): a model
named `GPT\u200d-4o` showed as a second GPT-4o (issue 28, case 9). Notes may hold them (an emoji
sequence), but not the controls.
"""

from __future__ import annotations

import re
import unicodedata

from django.core.exceptions import ValidationError
from django.db import models

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
ONE_LINE_FORBIDDEN = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\u2028\u2029]")
MULTI_LINE_FORBIDDEN = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}\u2028\u2029]")


def control_character(text: str, multiline: bool = False) -> str | None:
    """The first forbidden control character of `text` as U+XXXX, or None when there is none."""
    found = (MULTI_LINE_FORBIDDEN if multiline else ONE_LINE_FORBIDDEN).search(text)
    return f"U+{ord(found.group()):04X}" if found else None


def format_character(text: str) -> str | None:
    """The first invisible format character (category Cf) of `text` as U+XXXX, or None."""
    found = next((char for char in text if not char.isprintable() and unicodedata.category(char) == "Cf"), None)
    return f"U+{ord(found):04X}" if found else None


def control_character_problem(text: str, multiline: bool = False) -> str | None:
    """"contains a control character (U+001B)" (or, in one-line text, "contains an invisible format
    character (U+200D)"), or None: the message every refusal uses."""
    if found := control_character(text, multiline):
        return f"contains a control character ({found})"
    if not multiline and (found := format_character(text)):
        return f"contains an invisible format character ({found})"
    return None


def _refuse(problem: str | None) -> None:
    if problem:
        raise ValidationError(problem[0].upper() + problem[1:] + ".", code="control_character")


def one_line_text(value: str) -> None:
    """A Django validator: the admin's forms use it for every one-line field (PLAIN_TEXT_FIELDS)."""
    if isinstance(value, str):
        _refuse(control_character_problem(value))


def multi_line_text(value: str) -> None:
    """A Django validator for notes and reasons (tab and line breaks allowed)."""
    if isinstance(value, str):
        _refuse(control_character_problem(value, multiline=True))


# ModelAdmin.formfield_overrides for the admins where names and settings are typed in.
PLAIN_TEXT_FIELDS = {models.CharField: {"validators": [one_line_text]}}
