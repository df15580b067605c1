"""The submitter's client configuration (``liberopro_platform.client_config``, read by
``load_client_config``): the environment before the TOML file, an empty variable as unset, and the
messages a submitter sees. No services."""

from __future__ import annotations

from pathlib import Path

import pytest
from liberopro_platform.submitter_cli import PlatformError, load_client_config


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config file path (not yet written) named by LIBEROPRO_CONFIG; neither variable set."""
    path = tmp_path / "platform.toml"
    for name in ("LIBEROPRO_API_URL", "LIBEROPRO_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LIBEROPRO_CONFIG", str(path))
    return path


def test_the_environment_comes_before_the_file(conf, monkeypatch):
    conf.write_text('api_url = "http://file:1/"\ntoken = "lp_file"\nother = 3\n')
    assert load_client_config() == ("http://file:1", "lp_file")
    monkeypatch.setenv("LIBEROPRO_API_URL", "http://env:2/")
    monkeypatch.setenv("LIBEROPRO_TOKEN", "lp_env")
    assert load_client_config() == ("http://env:2", "lp_env")


def test_an_empty_variable_counts_as_unset(conf, monkeypatch):
    conf.write_text('api_url = "http://file:1"\n')
    monkeypatch.setenv("LIBEROPRO_API_URL", "")
    monkeypatch.setenv("LIBEROPRO_TOKEN", "")
    assert load_client_config() == ("http://file:1", None)


def test_without_a_file_the_environment_is_enough(conf, monkeypatch):
    monkeypatch.setenv("LIBEROPRO_API_URL", "http://env:2")
    assert load_client_config() == ("http://env:2", None)


def test_no_url_says_where_to_set_one(conf):
    with pytest.raises(PlatformError, match=f"no platform URL: set LIBEROPRO_API_URL or api_url in {conf}$"):
        load_client_config()
    conf.write_text('api_url = ""\n')
    with pytest.raises(PlatformError, match="no platform URL"):
        load_client_config()


def test_a_file_that_is_not_toml_is_named(conf):
    conf.write_text('api_url = "http://unterminated\n')
    with pytest.raises(PlatformError, match=f"^{conf} is not valid TOML: "):
        load_client_config()


def test_numbers_in_the_file_are_strings_and_other_types_are_refused(conf):
    conf.write_text("api_url = 5\ntoken = 7\n")
    assert load_client_config() == ("5", "7")
    conf.write_text("api_url = true\n")
    with pytest.raises(PlatformError, match=f"^{conf}: api_url: Input should be a valid string"):
        load_client_config()
