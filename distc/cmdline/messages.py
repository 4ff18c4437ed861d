"""The messages of the usage errors distc's command line has and click had not (imported only when
one is shown): an option where a value goes (``-o --json``), a single-valued option given twice
(``--rank 0 --rank 1``).  ``p`` is the :class:`~distc.cmdline.params.Option`."""

from __future__ import annotations


def option_as_value(p, name: str, word: str) -> str:
    """The message for ``-o --json``: an option where ``name`` wants its value."""
    spelled = next((o for o in p.opts if o.startswith("--")), None)
    how = f" (to mean the word {word!r} itself: {spelled}={word})" if spelled else ""
    return f"Option {name!r} requires an argument, not the option {word!r}{how}."


def given_twice(p, first: tuple[str, object], second: tuple[str, object]) -> str:
    """The message for ``--rank 0 --rank 1``: a single-valued option given twice."""
    def shown(name: str, value) -> str:
        return name if p.is_flag else f"{name} {value}"

    return (f"Option {second[0]!r} is given twice ({shown(*first)}, then {shown(*second)}): it takes one "
            "value; give it once.")
