"""Which characters text that names things may hold: the one rule for model, lab, run and
hardware names and settings, reported-score cells and the like (a model named
with terminal escape sequences retitled and cleared the terminal of whoever listed it).

Refused: C0 controls (ESC, NUL, BEL, CR...), DEL and the C1 controls (CSI U+009B acts like ESC [
on many terminals), the bidirectional overrides, embeddings and isolates (text that reads in
another order than it is stored), and the Unicode line and paragraph separators. Multi-line text
(notes, review notes, report reasons) may hold tab, line feed and carriage return.

One-line text (names) also refuses the invisible format characters, Unicode category Cf (zero-width
joiner U+200D, byte-order mark U+FEFF, the tag characters U+E0000-U+E007F, soft hyphen...): a model
named `GPT\u200d-4o` showed as a second GPT-4o. Notes may hold them (an emoji sequence), but not
the controls.
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
    """ "contains a control character (U+001B)" (or, in one-line text, "contains an invisible format
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


# ---------------------------------------------------------------------------------------------
# names of things: one name, one record
#
# Characters that show nothing and are not category Cf (refused above): the combining grapheme
# joiner, the Hangul fillers (NFKC turns U+3164 and U+FFA0 into U+1160), the Khmer inherent
# vowels, the variation selectors and the blank Braille pattern. A name made of them looks empty;
# inside a name they make a second name that looks like the first.
INVISIBLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)
_MARKS = {"Mn", "Me", "Mc"}

# Letters of other scripts drawn like Latin ones (the common part of Unicode's confusables.txt,
# UTS #39): folded to the Latin letter in a name's skeleton, so `GPT-4о` with a Cyrillic о is the
# name `GPT-4o`. Full-width and mathematical letters need no row: NFKC folds them first.
CONFUSABLES = str.maketrans(
    {
        **dict(zip("АаВСсЕеНһІіЈјКӀМОоРрԚԛЅѕТԜԝХхУуҮүӏԁ", "AaBCcEeHhIiJjKlMOoPpQqSsTWwXxYyYyld", strict=True)),
        **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧϹϲϳͿοναιρυκχγ", "ABEZHIKMNOPTYXCcjJovaipukxy", strict=True)),
        **dict(zip("Օօսհոզıȷɑɡɩʋ", "Oouhnqijagiu", strict=True)),
    }
)


def normalise_name(text: str) -> str:
    """A name as it is stored: NFKC (full-width and mathematical letters to plain ones, the odd
    spaces such as NBSP to a space), runs of white space as one space, ends stripped."""
    return " ".join(unicodedata.normalize("NFKC", text or "").split())


def _lone_mark(text: str) -> str | None:
    """The first combining character with no letter or digit to sit on, as U+XXXX, or None."""
    base = False
    for char in text:
        if unicodedata.category(char) in _MARKS:
            if not base:
                return f"U+{ord(char):04X}"
        else:
            base = unicodedata.category(char)[0] in "LN"
    return None


def name_problem(text: str) -> str | None:
    """Why `text` cannot name a model (or a lab, a hardware...), or None: a control or format
    character, blank once normalised, an invisible or filler character anywhere, or a combining
    character with nothing to combine with. The message every refusal of a name uses."""
    if problem := control_character_problem(text):
        return problem
    name = normalise_name(text)
    if not name:
        return "is blank"
    if found := INVISIBLE.search(name):
        return f"contains an invisible character (U+{ord(found.group()):04X})"
    if found := _lone_mark(name):
        return f"contains a combining character with no letter before it ({found})"
    return None


def name_skeleton(text: str) -> str:
    """What two names are compared by: equal skeletons look alike, so they name one thing. NFKC,
    the look-alikes of Latin letters folded to them (CONFUSABLES), accents and other non-spacing
    marks dropped, invisible characters dropped, case folded, white space as in normalise_name.
    ASCII is left as it is: `gpt-o1` and `o1`, `l` and `1` stay different names (never a guess)."""
    text = unicodedata.normalize("NFKC", text or "").translate(CONFUSABLES)
    text = "".join(
        char
        for char in unicodedata.normalize("NFD", text)
        if unicodedata.category(char) not in ("Mn", "Me", "Cf") and not INVISIBLE.match(char)
    )
    text = unicodedata.normalize("NFKC", text.casefold()).translate(CONFUSABLES)
    return " ".join(text.split())
