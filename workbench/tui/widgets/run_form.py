"""The run configuration form: shape, kernels, sets, A and B arms and the timing protocol."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from workbench.errors import BadArgument
from workbench.shapes import PRESETS, TP_CHOICES
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


class RunForm(Vertical):
    """Collects a `RunConfig`. ``config()`` validates and raises BadArgument naming the field."""

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
            for name in _SHAPE_FIELDS:
                yield Label(name.replace("_", "-"))
                value = getattr(c, name)
                yield Input(
                    "" if value is None else str(value),
                    placeholder=f"preset ({getattr(PRESETS[c.preset], name)})",
                    compact=True,
                    id=name,
                )
            yield Label("A")
            yield Select([(a, a) for a in ARMS], value=c.a, allow_blank=False, compact=True, id="a")
            yield Label("B")
            yield Select([(a, a) for a in ARMS], value=c.b, allow_blank=False, compact=True, id="b")
            yield Label("pairs")
            yield Input(str(c.pairs), compact=True, id="pairs")
            yield Label("target CI ±%")
            yield Input(str(c.target_pct), compact=True, id="target_pct")
            yield Label("calls")
            yield Input(str(c.calls), compact=True, id="calls")
            yield Label("replays")
            yield Input(str(c.replays), compact=True, id="replays")
            yield Label("seed")
            yield Input(str(c.seed), compact=True, id="seed")
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

    def _text(self, widget_id: str) -> str:
        return self.query_one(f"#{widget_id}", Input).value

    def config(self) -> RunConfig:
        """The validated configuration; shows and raises BadArgument on bad input."""
        try:
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
                a=self.query_one("#a", Select).value,
                b=self.query_one("#b", Select).value,
                pairs=_int(self._text("pairs"), "pairs", RunConfig.pairs),
                adaptive=self.query_one("#adaptive", Checkbox).value,
                target_pct=target,
                calls=_int(self._text("calls"), "calls", RunConfig.calls),
                replays=_int(self._text("replays"), "replays", RunConfig.replays),
                seed=_int(self._text("seed"), "seed", RunConfig.seed),
            ).validate()
        except BadArgument as e:
            self.query_one("#form-error", Static).update(Text(str(e), style="bold red"))
            raise
        self.query_one("#form-error", Static).update("")
        return config
