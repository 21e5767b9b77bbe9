"""Phone numbers, one rule for all: what a person types becomes E.164 (+819012345678), or a clear refusal.

The parsing and the numbering plans are libphonenumber's (the `phonenumbers` package). A national number
("090-1234-5678") is read in the region given (the user's or the deployment's, e.g. "JP"); a number that
starts with + carries its own country. Numbers are kept and sent as E.164, and shown masked in logs and pages.
"""

from __future__ import annotations

import re

import phonenumbers
from flask_babel import lazy_gettext
from phonenumbers import NumberParseException, PhoneNumberFormat, ValidationResult

E164_MAX_DIGITS = 15  # ITU-T E.164: country code and national number together
MASK = "•"
# The letters phonenumbers reads as a keypad's ("1-800-FLOWERS"), and those of "ext."/"tel:"; not "ー" (a long
# vowel mark that Japanese input often puts between digits, which phonenumbers reads as a hyphen).
LATIN_LETTER = re.compile(r"[A-Za-z]")

# Why phonenumbers could not read the text at all, as our reasons.
_PARSE_REASONS = {
    NumberParseException.INVALID_COUNTRY_CODE: "invalid_country_code",
    NumberParseException.NOT_A_NUMBER: "not_a_number",
    NumberParseException.TOO_SHORT_AFTER_IDD: "too_short",
    NumberParseException.TOO_SHORT_NSN: "too_short",
    NumberParseException.TOO_LONG: "too_long",
}
# Why a number it read cannot be dialled, as our reasons.
_LENGTH_REASONS = {
    ValidationResult.INVALID_COUNTRY_CODE: "invalid_country_code",
    ValidationResult.TOO_SHORT: "too_short",
    ValidationResult.IS_POSSIBLE_LOCAL_ONLY: "too_short",  # no area code: dialable only from inside the area
    ValidationResult.TOO_LONG: "too_long",
    ValidationResult.INVALID_LENGTH: "invalid_length",
}
# What the member reads (lazy: in the reader's language when shown); `where` (a region or +country code) is kept
# on the error for logs and callers that want to say more.
_MESSAGES = {
    "empty": lazy_gettext("No phone number was given."),
    "letters": lazy_gettext(
        "A phone number has no letters: type its digits (spaces, hyphens and parentheses are fine)."
    ),
    "not_a_number": lazy_gettext("This does not look like a phone number."),
    "invalid_country_code": lazy_gettext(
        "The country code is missing or unknown: start an international number with +."
    ),
    "too_short": lazy_gettext("The number is too short for its country."),
    "too_long": lazy_gettext("The number is too long for its country."),
    "invalid_length": lazy_gettext("The number has the wrong number of digits for its country."),
    "extension": lazy_gettext("An extension cannot receive text messages: leave it out."),
    "invalid_for_region": lazy_gettext("This is not a valid phone number for its country."),
    # Not a parse error: the number replied STOP (sms_suppressions); only its own START lifts that.
    "stopped": lazy_gettext(
        "This number asked us to stop texting it (it replied STOP). Reply START from that phone, then try again."
    ),
}
REASONS = frozenset(_MESSAGES)  # every InvalidPhone.reason, for callers that map them (API problem types)


class InvalidPhone(ValueError):
    """A phone number that cannot be used; `reason` is a short machine code, `message` what the member reads."""

    def __init__(self, reason: str, where: str | None = None):
        self.reason, self.where, self.message = reason, where, _MESSAGES[reason]
        super().__init__(f"{reason} ({where})" if where else reason)


def normalise(raw: str, region: str) -> str:
    """The E.164 form of a phone number typed in any common way; a national number is read in region."""
    text = (raw or "").strip()
    if not text:
        raise InvalidPhone("empty")
    # In a phone field letters are a mistake (or an extension), not a keypad's digits to convert.
    if LATIN_LETTER.search(text):
        raise InvalidPhone("letters")
    try:
        number = phonenumbers.parse(text, (region or "").upper() or None)
    except NumberParseException as error:
        raise InvalidPhone(_PARSE_REASONS.get(error.error_type, "not_a_number")) from None
    if number.extension:
        raise InvalidPhone("extension")
    where = _where(number, region)
    digits = len(str(number.country_code)) + len(phonenumbers.national_significant_number(number))
    if digits > E164_MAX_DIGITS:
        raise InvalidPhone("too_long", where)
    length = phonenumbers.is_possible_number_with_reason(number)
    if length != ValidationResult.IS_POSSIBLE:
        raise InvalidPhone(_LENGTH_REASONS.get(length, "invalid_for_region"), where)
    if not phonenumbers.is_valid_number(number):
        raise InvalidPhone("invalid_for_region", where)
    return phonenumbers.format_number(number, PhoneNumberFormat.E164)


def _where(number: phonenumbers.PhoneNumber, region: str) -> str:
    """Where a number was checked, for a message: its region, the one given, or else its country code."""
    found = phonenumbers.region_code_for_number(number)  # None when the number fits no region's plan
    if found:
        return found
    region = (region or "").upper()
    if region and phonenumbers.country_code_for_region(region) == number.country_code:
        return region
    return f"+{number.country_code}"  # +1 is shared by the US, Canada and the Caribbean


def mask(e164: str) -> str:
    """A number for logs and pages: its country code and last 4 digits, one • for each digit between."""
    digits = "".join(char for char in e164 or "" if char.isdigit())
    country = ""
    try:
        country = str(phonenumbers.parse(e164, None).country_code)
    except NumberParseException:
        pass  # not E.164: hide all but the last 4 digits
    rest = digits[len(country) :] if digits.startswith(country) else digits
    shown = rest[-4:] if len(rest) > 4 else ""  # a stub of 4 digits or fewer is hidden whole
    return ("+" + country if country else "") + MASK * (len(rest) - len(shown)) + shown
