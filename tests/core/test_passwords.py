"""The password policy of Fuzzball 4.4, each rule both ways; argon2 hashes; generated
passwords.

"New passwords must be at least 12 characters with mixed case, a digit and a special
character, and must not contain fuzzball, the username or email. Existing passwords keep
working until changed."
"""

from __future__ import annotations

import pytest
from argon2 import PasswordHasher

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.service.passwords import (
    check_policy,
    generate_password,
    hash_password,
    policy_violations,
    verify_password,
)

GOOD = "Sturdy-Lantern-42x"
USER = {"username": "ada", "email": "lovelace@example.org"}


def broken(password: str, **user: str) -> list[str]:
    return policy_violations(password, **(user or USER))


def test_a_password_meeting_every_rule_breaks_none():
    assert broken(GOOD) == []


def test_twelve_characters_are_enough():
    assert broken("Abcdefgh-12x") == []


def test_eleven_characters_are_too_few():
    assert broken("Abcdefg-12x") == ["it must be at least 12 characters long"]


def test_an_upper_case_letter_is_required():
    assert broken(GOOD.lower()) == ["it must contain an upper case letter"]


def test_a_lower_case_letter_is_required():
    assert broken(GOOD.upper()) == ["it must contain a lower case letter"]


def test_a_digit_is_required():
    assert broken("Sturdy-Lantern-xx") == ["it must contain a digit"]


def test_a_special_character_is_required():
    assert broken("SturdyLantern42x") == [
        "it must contain a special character (not a letter, digit or space)"
    ]


def test_a_space_is_no_special_character():
    assert broken("Sturdy Lantern 42x") == [
        "it must contain a special character (not a letter, digit or space)"
    ]


@pytest.mark.parametrize("spelling", ["fuzzball", "FuzzBall", "FUZZBALL"])
def test_fuzzball_in_any_case_is_refused(spelling):
    assert broken(f"My-{spelling}-42x") == ['it must not contain "fuzzball"']


def test_a_word_like_fuzzball_is_accepted():
    assert broken("My-Fuzzy-Ball-42x") == []


@pytest.mark.parametrize("spelling", ["ada", "ADA", "Ada"])
def test_the_username_in_any_case_is_refused(spelling):
    assert broken(f"Sturdy-{spelling}-42x") == ["it must not contain the username"]


def test_another_name_is_accepted():
    assert broken("Sturdy-Bob-42x") == []


@pytest.mark.parametrize("spelling", ["lovelace@example.org", "LoveLace@Example.org"])
def test_the_email_in_any_case_is_refused(spelling):
    assert broken(f"X1-{spelling}") == ["it must not contain the email address"]


def test_the_emails_local_part_is_refused():
    assert broken("Sturdy-Lovelace-42x") == ["it must not contain the email address"]


def test_another_email_is_accepted():
    assert broken("X1-babbage@example.org") == []


def test_every_broken_rule_is_named_at_once():
    assert broken("fuzzball") == [
        "it must be at least 12 characters long",
        "it must contain an upper case letter",
        "it must contain a digit",
        "it must contain a special character (not a letter, digit or space)",
        'it must not contain "fuzzball"',
    ]


def test_check_policy_refuses_without_echoing_the_password():
    with pytest.raises(InvalidArgument) as refused:
        check_policy("tiny-Pw1", **USER)
    message = str(refused.value)
    assert "12 characters" in message
    assert "tiny-Pw1" not in message


def test_a_hash_verifies_its_password_and_no_other():
    stored = hash_password(GOOD)
    assert stored.startswith("$argon2id$")
    assert verify_password(stored, GOOD)
    assert not verify_password(stored, GOOD + "!")


def test_a_password_set_before_the_policy_keeps_verifying():
    stored = PasswordHasher().hash("password")  # fails today's policy on four counts
    assert broken("password")
    assert verify_password(stored, "password")


def test_no_hash_or_a_malformed_one_verifies_nothing():
    assert not verify_password(None, GOOD)
    assert not verify_password("not-a-hash", GOOD)


def test_generated_passwords_meet_the_policy_for_their_user():
    passwords = {generate_password(**USER) for _ in range(50)}
    assert len(passwords) == 50
    assert all(broken(p) == [] for p in passwords)
