"""The planted copies of tests/test_one_home.py: for each of its checkers (by name), code that the
rule's old second home had, and what the checker must report of it (its lines under the name
x.py; test_a_planted_copy_is_found). Data only: a checker that cannot fail fails there."""

from __future__ import annotations

PLANTED = {
    # the engine's old budget check and adaptive stop (before abba.stop_reason)
    "stopping_rule_copies": (
        "def settled(s, proto, t0, now):\n"
        "    if proto.budget_s is not None and now - t0 >= proto.budget_s:\n"
        "        return True\n"
        "    return stats.should_stop(half_width=s.hw, n=s.n, min_n=proto.min_blocks)\n",
        [
            "x.py:4 calls should_stop",
            "x.py:2 reads .budget_s",
            "x.py:2 reads .budget_s",
            "x.py:4 reads .min_blocks",
        ],
    ),  # fmt: skip
    # a runner that settles with a rule of its own
    "settle_rule_copies": (
        "DONE = ('FASTER', 'FASTER<m', 'SLOWER<m', 'SLOWER')\n"
        "look = sequential.next_look(labels, 1, 4, 6, 9.0, None)\n"
        "conf = look_conf(4, 0.95)\n",
        [
            "x.py:2 calls next_look",
            "x.py:3 calls look_conf",
            "x.py:1 lists the decided labels",
        ],
    ),  # fmt: skip
    # the tuner's old _overall
    "verdict_combiners": (
        "def _overall(verdicts):\n"
        "    vs = set(verdicts.values())\n"
        "    if 'SLOWER' in vs:\n        return 'SLOWER'\n"
        "    if 'FASTER' in vs:\n        return 'FASTER'\n"
        "    return 'AMBIGUOUS'\n",
        ["x.py:_overall returns ['AMBIGUOUS', 'FASTER', 'SLOWER']"],
    ),
    # TuneEngine's old gate
    "gate_copies": (
        "class TuneEngine(Engine):\n    def gate(self, c, a, b):\n"
        "        diff = first_difference(a, b)\n        d = loose_difference(a, b)\n",
        ["x.py:3 calls first_difference", "x.py:4 calls loose_difference"],
    ),
    # the TUI's old form dataclass and the dict run_session read
    "run_config_forms": (
        "class RunConfig:\n    kernels: tuple = ()\n    sets: tuple = ()\n    pairs: int = 2\n"
        "    blocks: int = 2\n    calls: int = 48\n"
        "def run_session(c):\n"
        "    return (c.get('pairs'), c.get('blocks'), c.get('calls'), c.get('seed'),\n"
        "            c.get('kernels'))\n",
        [
            "x.py:RunConfig declares ['blocks', 'calls', 'kernels', 'pairs', 'sets']",
            "x.py:run_session reads ['blocks', 'calls', 'kernels', 'pairs', 'seed'] from a mapping",
        ],
    ),  # fmt: skip
    # toolchain's old regex
    "nvcc_readers": (
        "m = re.search(r'release (\\d+\\.\\d+)', out.stdout)\n",
        ["x.py:1 reads nvcc's release with 'release (\\\\d+\\\\.\\\\d+)'"],
    ),
    # a module's own tuple of the names
    "name_tuples": (
        "KERNELS = ('w13', 'w2', 'step')\nfor s in ['hot', 'rotating']:\n    pass\n",
        ["x.py:1 spells ('w13', 'w2', 'step')", "x.py:2 spells ('hot', 'rotating')"],
    ),
    # the old tune/screen.py's Pool and tune/ray_pool.py's actors
    "pool_copies": (
        "def run(self, tasks, on_message, cancel):\n"
        "    p = ctx.Process(target=worker_main, args=args, name=f'workbench-screen-{gpu}')\n"
        "    remote = ray.remote(num_gpus=1, max_concurrency=2)(ScreenActor)\n",
        ["x.py:2 starts a process", "x.py:3 starts a Ray worker of a GPU"],
    ),
    # run/settings.py's, plots/_common.py's and report/markdown.py's old arm lists
    "arm_lists": (
        'ARMS = ("b3-scalar", "b3-coop", "b4-scalar", "tinygemm", "triton-moe")\n'
        'VARIANT_COLORS = {"b4-scalar": "#7f7f7f", "b3-scalar": COLOR_A, "b3-coop": COLOR_B}\n'
        'PEERS = {"tinygemm": "peer: torch int4", "triton-moe": "peer: fused W4A16"}\n',
        [
            "x.py:1 lists ['b3-coop', 'b3-scalar', 'b4-scalar', 'tinygemm', 'triton-moe']",
            "x.py:2 maps ['b3-coop', 'b3-scalar', 'b4-scalar']",
            "x.py:3 maps ['tinygemm', 'triton-moe']",
        ],
    ),
    # the old run/workers.py's WorkerRun, which opened and wrote its runner's session
    "session_writers": (
        "def _open_session(self, hello):\n"
        "    self.r.session = SessionWriter(d, slug, cfg, hello['provenance'], env)\n"
        "def _message(self, w, kind, data):\n"
        "    self.r.session.nvml(data)\n"
        "    self.r.session.record('worker', **rec)\n",
        [
            "x.py:2 makes a SessionWriter",
            "x.py:4 writes session.nvml",
            "x.py:5 writes session.record",
        ],
    ),
    # the report's old method line, beside the verdict's own words (issue 45)
    "word_copies": (
        "def method_line(v):\n"
        '    """Says a t-interval over blocks."""\n'
        '    if v.method == "blocks":\n'
        '        return "95 % t-interval over blocks"\n'
        '    return "median over pairs, distribution-free 95 % CI of the median"\n',
        [
            "x.py:4 says 't-interval over'",
            "x.py:5 says 'CI of the median'",
            "x.py:5 says 'distribution-free'",
        ],
    ),
    # the TUI's and the CLI's old shift cells, which disagreed (issue 55)
    "shift_cell_copies": (
        "for s in diff.shifts:\n"
        "    cells = [num(s.shift, '+.4f'), 'yes' if s.changed else 'no']\n"
        "def _changed(s):\n"
        "    return 'verdict only' if s.verdict_changed else 'no'\n",
        ["x.py:2 reads .shift", "x.py:4 reads .verdict_changed"],
    ),
    # check.py's own tolerance and triton-moe's promise (issue 55); a scale of steps is no copy
    "tolerance_copies": (
        "REL_L2_MAX = 2e-3\n"
        "BUILTIN = {'triton-moe': {'promise': {'tolerance': 2e-3}}}\n"
        "STEPS = (0.001, 0.002, 0.005)\n",
        ["x.py:1 writes 0.002", "x.py:2 writes 0.002"],
    ),
    # `sessions list`'s old footnote
    "stale_sentences": (
        "def _list(infos):\n"
        "    if any(i.stale for i in infos):\n"
        "        print('STALE: kernel sources (csrc/) differ from the working tree: re-measure')\n",
        ["x.py:3 says 'STALE: kernel sources (csrc/) differ fro'"],
    ),
    # floor.py's old grid, which distributions.py repeated
    "subplot_grids": (
        "nc = 2 if len(keys) > 1 else 1\n"
        "nr = max(-(-len(keys) // nc), 1)\n"
        "fig, axes = plt.subplots(nr, nc, squeeze=False)\n",
        ["x.py:2 divides rows by ceiling"],
    ),
    # sessions.py's old _f
    "formatter_copies": (
        "def _f(x, fmt='.4f'):\n"
        "    return '-' if x is None or not math.isfinite(x) else format(x, fmt)\n"
        "def _p(p):\n    return 'n/a' if p is None else f'{p:.2g}'\n",
        ["x.py:_f", "x.py:_p"],
    ),
}
