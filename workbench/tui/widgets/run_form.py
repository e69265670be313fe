"""The run configuration form: shape (or a checkpoint), kernels, sets, A and B arms (a built-in
arm, or a spec file: a user's CUDA kernel or Python arm) and the timing protocol.

Numeric fields take digits only (Textual's integer/number inputs refuse other keys, so a key
meant for the app cannot slip into a field), and every change is checked at once: the first
problem shows under the form, naming the field. Escape leaves the form, so that the app's keys
work again.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.message import Message
from textual.validation import Integer, Number
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from workbench.core.errors import BadArgument
from workbench.data.shapes import PRESETS, TP_CHOICES
from workbench.tui.backend import ARMS, KERNELS, SETS, RunConfig

# Shape fields the user may override; blank means "the preset's value".
_SHAPE_FIELDS = ("hidden", "inter", "experts", "top_k", "layers")


def _int(text: str, name: str, blank: int | None = None) -> int | None:
    text = text.strip()
    if not text:
        return blank
    try:
        return int(text)
    except ValueError:
        raise BadArgument(f"{name}={text!r} is not an integer") from None


# The least value each integer field accepts (RunConfig.validate has the same floors).
_MINIMUM = {
    "pairs": 1,
    "blocks": 1,
    "calls": 1,
    "replays": 1,
    "seed": 0,
    "rank": 0,
} | dict.fromkeys(_SHAPE_FIELDS, 1)


def _integer(name: str, value: str, **kwargs) -> Input:
    low = _MINIMUM[name]
    return Input(
        value,
        type="integer",
        validators=[Integer(minimum=low, failure_description=f"must be an integer >= {low}")],
        compact=True,
        id=name,
        **kwargs,
    )


class RunForm(Vertical):
    """Collects a `RunConfig`. ``config()`` validates and raises BadArgument naming the field."""

    BINDINGS = [Binding("escape", "leave", "Leave form", show=False)]

    class Left(Message):
        """Escape in the form: the app moves focus back to its main area."""

    def __init__(self, config: RunConfig | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.initial = config or RunConfig()

    def compose(self) -> ComposeResult:
        c = self.initial
        with Grid(id="form-grid"):
            yield Label("preset")
            yield Select(
                [(name, name) for name in PRESETS],
                value=c.preset,
                allow_blank=False,
                compact=True,
                id="preset",
            )
            yield Label("tp")
            yield Select(
                [(str(tp), tp) for tp in TP_CHOICES],
                value=c.tp,
                allow_blank=False,
                compact=True,
                id="tp",
            )
            yield Label("checkpoint")
            yield Input(  # a real AWQ checkpoint's folder: its config.json then gives the shape
                c.checkpoint,
                placeholder="(blank: synthetic banks)",
                compact=True,
                id="checkpoint",
            )
            yield Label("rank")
            yield _integer("rank", str(c.rank))
            for name in _SHAPE_FIELDS:
                yield Label(name.replace("_", "-"))
                value = getattr(c, name)
                yield _integer(
                    name,
                    "" if value is None else str(value),
                    placeholder=f"preset ({getattr(PRESETS[c.preset], name)})",
                    valid_empty=True,  # blank: the preset's value
                )
            for side in ("a", "b"):
                arm = getattr(c, side)
                builtin = arm if arm in ARMS else getattr(RunConfig, side)
                yield Label(side.upper())
                yield Select(
                    [(a, a) for a in ARMS], value=builtin, allow_blank=False, compact=True, id=side
                )
                # a user's kernel spec or Python arm (docs/DESIGN.md §4.1, §4.8) instead
                yield Label(f"{side.upper()} spec")
                yield Input(
                    "" if arm in ARMS else arm,
                    placeholder="(blank: the arm above) spec.toml",
                    compact=True,
                    id=f"{side}-spec",
                )
            yield Label("blocks")
            yield _integer("blocks", str(c.blocks))
            yield Label("pairs/block")
            yield _integer("pairs", str(c.pairs))
            yield Label("target CI ±%")
            yield Input(
                str(c.target_pct),
                type="number",
                validators=[
                    Number(0, 50, failure_description="must be a number in (0, 50) percent")
                ],
                compact=True,
                id="target_pct",
            )
            yield Label("calls")
            yield _integer("calls", str(c.calls))
            yield Label("replays")
            yield _integer("replays", str(c.replays))
            yield Label("seed")
            yield _integer("seed", str(c.seed))
        with Horizontal(classes="checks"):
            for k in KERNELS:
                yield Checkbox(k, k in c.kernels, compact=True, id=f"kernel-{k}")
        with Horizontal(classes="checks"):
            for s in SETS:
                yield Checkbox(s, s in c.sets, compact=True, id=f"set-{s}")
            yield Checkbox("adaptive", c.adaptive, compact=True, id="adaptive")
        yield Static("", id="form-error")
        yield Button("Run  (r)", variant="primary", compact=True, id="run-button")

    def on_select_changed(self, event: Select.Changed) -> None:
        # Keep the shape placeholders honest: they show what a blank field will mean.
        if event.select.id == "preset" and event.value in PRESETS:
            preset = PRESETS[event.value]
            for name in _SHAPE_FIELDS:
                self.query_one(f"#{name}", Input).placeholder = f"preset ({getattr(preset, name)})"
        self.check()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.check()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        event.stop()
        self.check()

    def action_leave(self) -> None:
        self.post_message(self.Left())

    def check(self) -> str:
        """Show the first problem of the form under it (or clear it); return it ("" if none)."""
        try:
            self.config()
        except BadArgument as e:
            return str(e)
        return ""

    def _text(self, widget_id: str) -> str:
        return self.query_one(f"#{widget_id}", Input).value

    def _arm(self, side: str) -> str:
        """The side's spec file if one is given (it must exist), else its built-in arm."""
        spec = self._text(f"{side}-spec").strip()
        if not spec:
            return self.query_one(f"#{side}", Select).value
        if not spec.endswith(".toml"):
            raise BadArgument(f"{side}-spec={spec!r} must be a kernel or Python arm spec (.toml)")
        if not Path(spec).expanduser().is_file():
            raise BadArgument(f"{side}-spec={spec!r}: no such file")
        return str(Path(spec).expanduser())

    def config(self) -> RunConfig:
        """The validated configuration; shows and raises BadArgument on bad input."""
        try:
            for field in self.query(Input):
                result = field.validate(field.value)
                if result is not None and not result.is_valid:
                    raise BadArgument(
                        f"{field.id}={field.value!r} {'; '.join(result.failure_descriptions)}"
                    )
            target_text = self._text("target_pct").strip()
            try:
                target = float(target_text)
            except ValueError:
                raise BadArgument(f"target_pct={target_text!r} is not a number") from None
            config = RunConfig(
                preset=self.query_one("#preset", Select).value,
                tp=self.query_one("#tp", Select).value,
                **{name: _int(self._text(name), name) for name in _SHAPE_FIELDS},
                kernels=tuple(k for k in KERNELS if self.query_one(f"#kernel-{k}", Checkbox).value),
                sets=tuple(s for s in SETS if self.query_one(f"#set-{s}", Checkbox).value),
                a=self._arm("a"),
                b=self._arm("b"),
                pairs=_int(self._text("pairs"), "pairs", RunConfig.pairs),
                blocks=_int(self._text("blocks"), "blocks", RunConfig.blocks),
                adaptive=self.query_one("#adaptive", Checkbox).value,
                target_pct=target,
                calls=_int(self._text("calls"), "calls", RunConfig.calls),
                replays=_int(self._text("replays"), "replays", RunConfig.replays),
                seed=_int(self._text("seed"), "seed", RunConfig.seed),
                checkpoint=self._text("checkpoint").strip(),
                rank=_int(self._text("rank"), "rank", RunConfig.rank),
            ).validate()
        except BadArgument as e:
            self.query_one("#form-error", Static).update(Text(str(e), style="bold red"))
            raise
        self.query_one("#form-error", Static).update("")
        return config
