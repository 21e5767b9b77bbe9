"""Phone numbers (app/phones.py): E.164 from what people type, clear refusals, and masking."""

from __future__ import annotations

import pytest

from app.phones import REASONS, InvalidPhone, mask, normalise


@pytest.mark.parametrize(
    ("raw", "region", "e164"),
    [
        ("+819012345678", "JP", "+819012345678"),  # already E.164
        ("+81 90-1234-5678", "JP", "+819012345678"),
        ("090-1234-5678", "JP", "+819012345678"),  # national, read in the region given
        ("09012345678", "JP", "+819012345678"),
        ("090 1234 5678", "jp", "+819012345678"),  # the region's case does not matter
        ("  (090) 1234-5678\n", "JP", "+819012345678"),
        ("03-1234-5678", "JP", "+81312345678"),  # a Tokyo landline
        ("０９０-１２３４-５６７８", "JP", "+819012345678"),  # full-width digits
        ("０９０ー１２３４ー５６７８", "JP", "+819012345678"),  # the long vowel mark typed as a hyphen
        ("(202) 555-0143", "US", "+12025550143"),
        ("202.555.0143", "US", "+12025550143"),
        ("1 202 555 0143", "US", "+12025550143"),  # the trunk prefix 1
        ("+1 (202) 555-0143", "JP", "+12025550143"),  # a +number keeps its own country
        ("+44 20 7946 0958", "US", "+442079460958"),
    ],
)
def test_numbers_people_type_become_e164(raw, region, e164):
    assert normalise(raw, region) == e164


@pytest.mark.parametrize(
    ("raw", "region", "reason"),
    [
        ("", "JP", "empty"),
        ("   ", "JP", "empty"),
        ("call me", "JP", "letters"),
        ("1-800-FLOWERS", "US", "letters"),  # phonenumbers would dial it as 1-800-356-9377
        ("090-1234-5678 ext. 12", "JP", "letters"),
        ("---", "JP", "not_a_number"),
        ("+", "JP", "not_a_number"),
        ("０９０ＡＢＣ１２３４", "JP", "not_a_number"),  # full-width letters
        ("123", "JP", "too_short"),
        ("+81 12", "JP", "too_short"),
        ("555-0143", "US", "too_short"),  # no area code
        ("+1 202 555 014", "US", "too_short"),  # +1 with 9 digits
        ("+1 202 555 01434", "US", "too_long"),  # +1 with 11 digits
        ("+81 90 1234 5678 9012 3", "JP", "too_long"),  # more than E.164's 15 digits
        ("1" * 300, "JP", "too_long"),
        ("+61 412 345 67890", "AU", "invalid_length"),  # 11 national digits: between the lengths AU allows
        ("+1 055 555 0143", "US", "invalid_for_region"),  # no area code starts with 0
        ("03-1234-5678", "US", "invalid_for_region"),  # a Tokyo number read as American
        ("090-1234-5678", "ZZ", "invalid_country_code"),  # national, in no known region
        ("090-1234-5678", "", "invalid_country_code"),
        ("+999 1234 5678", "JP", "invalid_country_code"),
        ("+1 202 555 0143 #12", "US", "extension"),
    ],
)
def test_unusable_numbers_are_refused_with_a_reason(raw, region, reason):
    with pytest.raises(InvalidPhone) as refused:
        normalise(raw, region)
    assert refused.value.reason == reason
    assert reason in REASONS


def test_the_refusal_is_a_value_error_that_says_what_is_wrong():
    with pytest.raises(ValueError, match=r"^too_short \(US\)$"):
        normalise("+1 202 555 014", "US")
    with pytest.raises(ValueError, match=r"^too_long \(JP\)$"):
        normalise("+81 90 1234 5678 9012 3", "JP")
    with pytest.raises(ValueError, match=r"^invalid_for_region \(\+1\)$"):
        normalise("+1 055 555 0143", "JP")  # fits no region of +1, and JP is not one of them
    with pytest.raises(ValueError, match="invalid_country_code"):
        normalise("090-1234-5678", "")
    with pytest.raises(ValueError, match="letters"):
        normalise("1-800-FLOWERS", "US")


def test_the_refusal_does_not_repeat_the_number():
    with pytest.raises(InvalidPhone) as refused:
        normalise("+81 90 1234 5678 9012 3", "JP")
    assert "1234" not in str(refused.value)


@pytest.mark.parametrize(
    ("e164", "masked"),
    [
        ("+819012345678", "+81••••••5678"),
        ("+12025550143", "+1••••••0143"),
        ("+442079460958", "+44••••••0958"),
        ("+1234", "+1•••"),  # too short to show any of it
        ("12345678", "••••5678"),  # not E.164: no country code shown
        ("", ""),
    ],
)
def test_a_masked_number_shows_its_country_code_and_last_four_digits(e164, masked):
    assert mask(e164) == masked


def test_mask_takes_what_normalise_gives():
    assert mask(normalise("090-1234-5678", "JP")) == "+81••••••5678"
