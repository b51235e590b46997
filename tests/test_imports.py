"""The package's import graph, read from its sources: imports run one way only (no cycle, counting imports inside
functions too), the serving engine loads no training code, and nothing in the engine or the kernels reads the
environment except Triton's own `TRITON_INTERPRET`."""
import ast, os, re, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / 'effqwen'

def _modules()->dict:
    "{module name: source path} of every module of the package ('effqwen.kernels' for a package's __init__)."
    out = {}
    for p in ROOT.rglob('*.py'):
        parts = list(p.relative_to(ROOT.parent).with_suffix('').parts)
        if parts[-1] == '__init__': parts = parts[:-1]
        out['.'.join(parts)] = p
    return out

def import_graph()->dict:
    "{module: set of effqwen modules it imports anywhere in its source (relative imports resolved)}."
    mods, graph = _modules(), {}
    for name, path in mods.items():
        pkg = name if path.name == '__init__.py' else name.rpartition('.')[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import): targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ''
                if node.level:
                    up = pkg.split('.')[:len(pkg.split('.')) - node.level + 1]
                    base = '.'.join(up + ([base] if base else []))
                targets = [f'{base}.{a.name}' if f'{base}.{a.name}' in mods else base for a in node.names]
            else: continue
            deps |= {t for t in targets if t in mods and t != name}
        graph[name] = deps
    return graph

def find_cycle(graph:dict)->list|None:
    "A cycle of the graph as a list of modules, or None."
    state, stack = {}, []
    def visit(n):
        state[n] = 1; stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1: return stack[stack.index(d):] + [d]
            if d not in state and (c := visit(d)): return c
        state[n] = 2; stack.pop()
        return None
    for n in sorted(graph):
        if n not in state and (c := visit(n)): return c
    return None

def test_the_cycle_finder_finds_cycles():
    assert find_cycle({'a': {'b'}, 'b': {'c'}, 'c': set()}) is None
    assert find_cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']

def test_no_import_cycle():
    g = import_graph()
    assert 'effqwen.kernels.triton' in g and 'effqwen.engine.engine' in g
    assert 'effqwen.kernels.layouts' in g['effqwen.kernels.triton'] and 'effqwen.engine.spec' in g['effqwen.engine.engine']
    assert find_cycle(g) is None, f'import cycle: {" -> ".join(find_cycle(g))}'

def test_layers_run_downward():
    "The kernels import nothing of the engine; the engine and the kernels import no benchmark."
    g = import_graph()
    for m, deps in g.items():
        if m.startswith('effqwen.kernels'): assert not any(d.startswith('effqwen.engine') or d == 'effqwen.bench' for d in deps), (m, deps)
        if m.startswith('effqwen.engine'): assert 'effqwen.bench' not in deps, m

def test_serving_loads_no_training_code():
    "Importing the engine (StaticDrafter included) loads neither the drafter's training module nor the quantization recipes' training."
    code = "import sys, effqwen.engine; bad = [m for m in ('effqwen.dflash', 'effqwen.specdec', 'effqwen.drafter_opt', 'effqwen.qad') if m in sys.modules]; print(bad)"
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=ROOT.parent, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == '[]', r.stdout + r.stderr[-2000:]

def test_no_environment_reads_in_engine_and_kernels():
    for p in list((ROOT / 'kernels').rglob('*.py')) + list((ROOT / 'engine').rglob('*.py')):
        reads = re.findall(r"os\.environ(?:\.get)?\(?\[?'(\w+)'", p.read_text())
        assert set(reads) <= {'TRITON_INTERPRET'}, (p.name, reads)
        assert 'getenv' not in p.read_text(), p.name
