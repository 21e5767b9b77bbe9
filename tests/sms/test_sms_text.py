"""An SMS body's encoding and parts (app/sms_text.py), counted as carriers count them."""

from __future__ import annotations

import dataclasses

import pytest

from app.sms_text import GSM7_BASIC, GSM7_EXTENSION, SmsText, fits, is_gsm7, measure, split

EMOJI = "😀"  # U+1F600, outside the BMP: a surrogate pair in UTF-16
KANA = "あ"  # one UTF-16 code unit, not GSM-7


def test_the_tables_are_the_standards():
    assert len(GSM7_BASIC) == 127  # 128 codes, less the escape
    assert GSM7_EXTENSION == set("\f^{}\\[~]|€")
    assert set("@£$¥èéùìòÇ\n\rØøÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ¤¡ÄÖÑÜ§¿äöñüà") <= GSM7_BASIC
    assert set(" !\"#%&'()*+,-./:;<=>?") <= GSM7_BASIC
    # Look-alikes and near misses that are not in the default alphabet.
    for char in "êçáíóúÁÍÓÚÈÌÒÙ`’“”…–\t\u2126\u00a0":  # the ohm sign (not Greek Ω), a no-break space
        assert not is_gsm7(char), repr(char)


def test_an_empty_text_is_no_message():
    assert measure("") == SmsText(encoding="GSM-7", segments=0, units=0, per_segment=160, forcing=())
    assert split("") == ()
    assert fits("", 0)


@pytest.mark.parametrize(
    ("length", "segments", "per_segment"),
    [(1, 1, 160), (160, 1, 160), (161, 2, 153), (306, 2, 153), (307, 3, 153), (459, 3, 153), (460, 4, 153)],
)
def test_gsm7_fits_160_alone_and_153_per_part(length, segments, per_segment):
    sms = measure("a" * length)
    assert (sms.encoding, sms.segments, sms.units, sms.per_segment) == ("GSM-7", segments, length, per_segment)
    assert sms.forcing == ()


def test_the_parts_are_the_text_in_order():
    text = "".join(str(i % 10) for i in range(400))
    parts = split(text)
    assert [len(part) for part in parts] == [153, 153, 94]
    assert "".join(parts) == text


def test_extension_characters_cost_two_septets():
    assert measure("^{}\\[~]|€\f").units == 20
    assert measure("€" * 80) == SmsText("GSM-7", 1, 160, 160, ())
    assert measure("a" * 159 + "€").segments == 2  # 161 septets
    assert measure("\n\r").units == 2  # line feed and carriage return are in the basic set


def test_an_escape_pair_at_a_part_boundary_moves_to_the_next_part():
    # 306 septets would be two full parts, but the € would straddle septets 153-154: it starts part 2,
    # part 1 ends one septet short, and part 2 overflows into a third.
    text = "a" * 152 + "€" + "b" * 152
    sms = measure(text)
    assert (sms.units, sms.segments) == (306, 3)
    parts = split(text)
    assert parts == ("a" * 152, "€" + "b" * 151, "b")
    # One septet earlier, the pair ends part 1 exactly and two parts suffice.
    assert split("a" * 151 + "€" + "b" * 153) == ("a" * 151 + "€", "b" * 153)


def test_many_escape_pairs_fill_76_per_part():
    assert [len(part) for part in split("€" * 81)] == [76, 5]  # 153 is odd: each part wastes a septet


@pytest.mark.parametrize(
    ("length", "segments", "per_segment"),
    [(70, 1, 70), (71, 2, 67), (67 * 2, 2, 67), (67 * 2 + 1, 3, 67)],
)
def test_ucs2_fits_70_alone_and_67_per_part(length, segments, per_segment):
    sms = measure(KANA * length)
    assert (sms.encoding, sms.segments, sms.units, sms.per_segment) == ("UCS-2", segments, length, per_segment)
    assert sms.forcing == (KANA,)


def test_an_emoji_counts_two_units():
    assert measure(EMOJI) == SmsText("UCS-2", 1, 2, 70, (EMOJI,))
    assert measure(KANA * 68 + EMOJI).segments == 1  # 70 units
    assert measure(KANA * 69 + EMOJI).segments == 2  # 71 units


def test_a_surrogate_pair_at_a_part_boundary_moves_to_the_next_part():
    text = KANA * 66 + EMOJI + KANA * 66  # 134 units, yet the emoji would straddle units 67-68
    assert measure(text).segments == 3
    assert split(text) == (KANA * 66, EMOJI + KANA * 65, KANA)


def test_one_character_outside_gsm7_makes_the_whole_text_ucs2():
    latin = "a" * 100
    assert measure(latin).encoding == "GSM-7"
    sms = measure(latin + EMOJI)
    assert (sms.encoding, sms.units, sms.segments) == ("UCS-2", 102, 2)


def test_a_japanese_sentence_is_ucs2():
    sentence = "明日の午前2時から4時までメンテナンスを行います。ご不便をおかけします。"
    sms = measure(sentence)
    assert (sms.encoding, sms.units, sms.segments, sms.per_segment) == ("UCS-2", len(sentence), 1, 70)
    assert sms.forcing[:3] == ("明", "日", "の")
    assert "2" not in sms.forcing and "4" not in sms.forcing
    assert measure(sentence * 2).segments == 2  # 70 < 72 units <= 134


def test_forcing_lists_each_offending_character_once_in_order_of_first_appearance():
    sms = measure("Café ñandú — ça va? ú ça 😀 — Ça")
    # é, ñ, ? and Ç are GSM-7; ú (acute), the em dash and the small ç are not.
    assert sms.forcing == ("ú", "—", "ç", EMOJI)


def test_e_acute_is_gsm7_but_e_circumflex_is_not():
    resume = "Résumé " + "x" * 153  # 160 characters
    assert measure(resume) == SmsText("GSM-7", 1, 160, 160, ())
    circumflex = measure(resume.replace("é", "ê", 1))
    assert circumflex == SmsText("UCS-2", 3, 160, 67, ("ê",))  # 134 < 160 <= 201


def test_curly_quotes_from_a_word_processor_force_ucs2():
    assert measure("It's fine").encoding == "GSM-7"
    assert measure("It’s fine").forcing == ("’",)


def test_fits_a_maximum_of_parts():
    assert fits("a" * 306, 2)
    assert not fits("a" * 307, 2)
    assert fits(KANA * 70, 1)
    assert not fits(KANA * 71, 1)
    assert not fits("a", 0)


def test_the_result_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        measure("hi").segments = 5  # type: ignore[misc]
