"""The help screen: what each part of the workbench shows and the keys that drive it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# workbench

Decide, per kernel and per GPU, whether the **cooperative** reader of 3-byte AWQ metadata beats
the **scalar** one. A run builds the variants, checks that A and B compute bit-identical outputs,
then times them as ABBA pairs of CUDA-Graph replays on a hot and a rotating expert set.

## From nothing to a recommendation
1. **Build & run** tab: press `b` to build the variants (the matrix shows build time, registers
   and spills; `l` shows a variant's compiler log).
2. Set the run (preset or shape, or a checkpoint folder and its rank; tp, kernels, sets, A and B,
   pairs, calls, replays) and press `r`. A or B may be a spec file instead of a built-in arm
   (its *spec* field): a user's CUDA kernel or Python arm, as `workbench ab --b FILE` takes.
   Numeric fields take digits only; a bad value is named under the form. `escape` leaves the
   form, so that the keys below act again. The progress panel shows pair *k* of *n* and the
   current ratio B/A with its 95 % CI, and charts it. `escape` cancels: the samples measured so
   far are kept as an *interrupted* session.
3. **Results** tab: first the recommendation, one line per kernel (the reader it names and
   why, where the line has room for it); then per (kernel, set) the verdict (FASTER, SLOWER,
   SAME, AMBIGUOUS), the ratio, its CI, the median ms of A and B, µs per call, the Wilcoxon p,
   how many pairs favour B and the blocks a verdict rests on; the comparisons that decide come
   first, then the step confirmations, then the references (dim). Below the table: the ratio
   chart, then the evidence per set, the rule and the session's notes in full: `pagedown` or
   `end` scrolls down to them. Opening a session focuses its table (the arrows move in it at
   once); `tab` goes to the tab bar and back. A column that does not fit is left blank, never
   cut: `→` scrolls the table sideways to it, the comparison's name staying in view.
4. **Sessions** tab: `enter` opens a saved session, `m` marks one, `x` compares the marked one
   with the highlighted one (one card per comparison, the deciding ones first: the shift B−A,
   then each session's ratio, CI and verdict on a line of its own; `pagedown` scrolls), `e`
   exports plots and the Markdown report of the open session. The footer shows the keys of
   the table in focus and the tab keys; every key works on every tab.

Without a terminal (a GPU machine over ssh, CI): `workbench tui --screenshot out.svg --run`
performs the default run headless and saves an SVG of the finished screen.

The GPU panel on the right shows NVML readings (memory, clocks, temperature, power, throttle
reasons and their recent history) while idle and during runs.
Without a GPU the workbench opens in browse mode: saved sessions, and builds (they need nvcc
alone, not a GPU); `r` says why it cannot run. Without NVML, or on a narrow
terminal, the GPU panel is one line at the bottom.

## Keys
| key | action |
|---|---|
| `b` | build all variants |
| `r` | run with the form's configuration |
| `escape` | leave the run form; else cancel the build or run in progress |
| `l` | compiler log of the highlighted variant |
| `enter`, `o` | open the highlighted session |
| `m` | mark a session for comparison |
| `x` | compare the marked session with the highlighted one |
| `e` | export plots and report of the open session |
| `h` | hardware counters of the open session, A beside B (`workbench ab --counters`) |
| `s` | rescan the sessions folder |
| `t` | tune: screen a kernel's parameter values, confirm the best (`workbench tune`) |
| `pagedown` `pageup` `home` `end` | scroll the Results tab (the evidence and the rule are at its end) |
| `tab`, `shift+tab` | move the focus between the tables, the form and the panels |
| `1` `2` `3` | Build & run, Results, Sessions tabs |
| `ctrl+p` | command palette (every action above) |
| `f1` `?` | this help |
| `q`, `ctrl+c` | quit (a build or run is cancelled first; its session is kept) |
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,f1,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        body = VerticalScroll(id="help-body", classes="modal-body")
        body.border_subtitle = "escape closes · ↑↓ scroll"
        with body:
            yield Markdown(HELP)
