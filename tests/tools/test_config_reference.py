"""tools/config_reference.py: the committed configuration reference is what the schema
writes, and it lists every key the schema declares."""

from gpurl import schema
from tools import config_reference


def test_committed_page_is_what_the_schema_writes():
    assert config_reference.main(["--check"]) == 0, (
        "docs/configuration.md is stale: run python tools/config_reference.py"
    )


def test_every_declared_key_has_a_row_with_its_type_and_doc():
    text = config_reference.page()
    for row in schema.reference(own_only=True):
        assert f"| `{row.path}` | {config_reference._cell(row.type)} |" in text
        assert config_reference._cell(row.doc) in text


def test_check_fails_on_a_stale_page(tmp_path, capsys):
    stale = tmp_path / "configuration.md"
    stale.write_text("# Configuration reference\n")
    assert config_reference.main(["--check", "--out", str(stale)]) == 1
    assert "stale" in capsys.readouterr().out
    assert config_reference.main(["--out", str(stale)]) == 0
    assert config_reference.main(["--check", "--out", str(stale)]) == 0


def test_plugins_are_in_the_page_when_asked(scoped_registry):
    from tests.extending.corridor import CorridorConfig, CorridorEnv

    scoped_registry.register("env", "corridor", CorridorConfig)(CorridorEnv)
    assert "env.length" not in config_reference.page()
    text = config_reference.page(plugins=True)
    assert "## env=corridor {#env-corridor}" in text and "| `env.length` | int |" in text
    assert "Declared in `tests/extending/corridor.py`." in text
