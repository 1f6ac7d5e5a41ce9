"""[alerts]: the addresses the alert policies email, refused in the user's words when wrong."""

from __future__ import annotations

import pytest

from tpudeploy.config import ConfigError, parse_config


def test_none_by_default_and_a_list_kept_in_order() -> None:
    assert parse_config({}).alerts.emails == ()
    cfg = parse_config({"alerts": {"emails": ["b@example.com", "a+ops@team.example.org"]}})
    assert cfg.alerts.emails == ("b@example.com", "a+ops@team.example.org")


@pytest.mark.parametrize(
    ("emails", "fragments"),
    [
        (["Ann <ann@example.com>"], ["alerts.emails", "'Ann <ann@example.com>'", "not an email"]),
        (["ops@localhost"], ["'ops@localhost' is not an email"]),
        (["a@example.com, b@example.com"], ["one address per string"]),
        (["a@example.com", "a@example.com"], ["a@example.com listed twice"]),
        ("a@example.com", ["alerts.emails", "a list"]),
    ],
)
def test_a_bad_address_names_the_key_the_value_and_the_fix(
    emails: object, fragments: list[str]
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"alerts": {"emails": emails}}, source="deploy.toml")
    message = str(err.value)
    for fragment in fragments:
        assert fragment in message, message
    assert "Fix:" in message
