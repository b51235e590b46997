"""scripts/answers_mix.py: a run's answers per prompt kind (the bundle's rows first, then the extra file's)."""
import importlib.util, io, json, tarfile, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location('answers_mix', ROOT/'scripts'/'answers_mix.py')
am = importlib.util.module_from_spec(spec); spec.loader.exec_module(am)

def test_kind_names():
    assert am.kind('extra/reason_grow/simple_equations/310') == 'reason_grow'
    assert am.kind('code/json/decoder:12/complete') == 'bundle_code'

def test_mix_shares_and_bad_row():
    rows = [dict(id='rg/gcd/1'), dict(id='extra/essay/3/w0/ask1'), dict(id='extra/essay/4/w0/ask2')]
    m = am.mix({'0': 'ab', '1': 'abcdef', '2': 'xy'}, rows)
    assert list(m) == ['essay', 'bundle_rg']                                   # largest share first
    assert m['essay'] == dict(answers=2, answer_chars=8, share=0.8) and m['bundle_rg']['share'] == pytest.approx(0.2)
    with pytest.raises(ValueError, match='outside the 3-prompt pool'): am.mix({'3': 'a'}, rows)

def test_cli_reads_a_tar(tmp_path):
    (tmp_path/'b.json').write_text(json.dumps(dict(train=[dict(id='code/x:1/explain')])))
    (tmp_path/'e.json').write_text(json.dumps(dict(train=[dict(id='extra/rg/gcd/7')])))
    with tarfile.open(tmp_path/'a.tar.xz', 'w:xz') as tf:
        for name, d in (('regen_bf16.json', {'0': 'aaa', '1': 'b'}), ('regen_int4.json', {'1': 'cc'})):
            raw = json.dumps(d).encode(); ti = tarfile.TarInfo(name); ti.size = len(raw); tf.addfile(ti, io.BytesIO(raw))
    out = subprocess.run([sys.executable, str(ROOT/'scripts'/'answers_mix.py'), '--tar', str(tmp_path/'a.tar.xz'),
                          '--bundle-prompts', str(tmp_path/'b.json'), '--extra', str(tmp_path/'e.json')],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert 'bf16: 2 answers' in out and 'int4: 1 answers' in out and '75.0%' in out
