"""The engine's decode kernels compiled for sm_90 without a GPU (Triton's wheel carries ptxas): the loads that need not
wait for the kernel before (`GDN_STATE_EARLY`, `ATTN_PREFETCH`) come before the programmatic-dependent-launch wait in
the PTX when asked for, and not otherwise."""
import os
import pytest

triton = pytest.importorskip('triton')

def _ptxas_ok() -> bool:
    b = os.path.join(os.path.dirname(triton.__file__), 'backends/nvidia/bin')
    return os.access(os.path.join(b, 'ptxas'), os.X_OK)

pytestmark = pytest.mark.skipif(not _ptxas_ok() or os.environ.get('TRITON_INTERPRET') == '1', reason="needs the Triton wheel's ptxas")

def _before_wait(kernel, sig: dict, consts: dict, op: str, warps: int = 4, stages: int = 3) -> tuple:
    "(count of `op` in the PTX before griddepcontrol.wait, count in all) of `kernel` compiled for sm_90."
    from triton.compiler import ASTSource
    from triton.backends.compiler import GPUTarget
    sig = sig | {k: 'constexpr' for k in consts}
    ptrs = [i for i, t in enumerate(sig.values()) if t.startswith('*')]
    k = triton.compile(ASTSource(kernel, sig, consts, attrs={(i,): [['tt.divisibility', 16]] for i in ptrs}),
                       target=GPUTarget('cuda', 90, 32), options=dict(num_warps=warps, num_stages=stages))
    lines = k.asm['ptx'].splitlines()
    w = next(i for i, l in enumerate(lines) if 'griddepcontrol.wait' in l)
    return sum(op in l for l in lines[:w]), sum(op in l for l in lines)

def test_gdn_state_loads_before_the_wait():
    import effqwen.engine as E
    sig = dict(proj_ptr='*bf16', buf_ptr='*bf16', cw_ptr='*bf16', nega_ptr='*fp32', dtb_ptr='*bf16', S_ptr='*fp32', o_ptr='*bf16',
               Kd='i32', Vd='i32', C='i32', HV='i32', scale='fp32')
    base = dict(RATIO=2, DK=128, DV=128, BK=128, BV=32, KC=4, PDL=True)
    early, total = _before_wait(E._gdn_step_kernel, sig, base | dict(EARLY_S=True), 'ld.global')
    assert early == 8 and total > early                     # the 128 x 32 float32 slice: 8 vector loads a thread
    assert _before_wait(E._gdn_step_kernel, sig, base | dict(EARLY_S=False), 'ld.global')[0] == 0

def test_attention_prefetch_before_the_wait():
    import effqwen.engine as E
    sig = dict(q_ptr='*bf16', kc_ptr='*bf16', vc_ptr='*bf16', pos_ptr='*i64', mp_ptr='*fp32', lp_ptr='*fp32', ap_ptr='*fp32',
               LMAX='i32', NS='i32', scale='fp32')
    base = dict(REP=4, BR=16, D=256, CHUNK=256, BL=64, IEEE=False, T=1, H=16, PDL=True, CAUSAL=True, WIN=0)
    for dyn in (False, True):                               # DYN: chunks by the live context (`ATTN_DYN_CHUNK`), the same hint
        pf, total = _before_wait(E._attn_split_kernel, sig, base | dict(PREFETCH=True, DYN=dyn), 'prefetch.global.L2')
        assert pf == total == 16, dyn                       # 256 rows x 4 lines, keys and values, over 128 threads
    assert _before_wait(E._attn_split_kernel, sig, base | dict(PREFETCH=False, DYN=True), 'prefetch.global.L2') == (0, 0)

def test_attention_dynamic_chunks_compile():
    "The split-K attention and its combine with chunks sized by the live context (`ATTN_DYN_CHUNK`, `ATTN_DYN_VERIFY`) build for sm_90 at one row and at verify's 16."
    import effqwen.engine as E
    sig = dict(q_ptr='*bf16', kc_ptr='*bf16', vc_ptr='*bf16', pos_ptr='*i64', mp_ptr='*fp32', lp_ptr='*fp32', ap_ptr='*fp32',
               LMAX='i32', NS='i32', scale='fp32')
    csig = dict(mp_ptr='*fp32', lp_ptr='*fp32', ap_ptr='*fp32', pos_ptr='*i64', proj_ptr='*bf16', out_ptr='*bf16', NS='i32')
    for T, BR, BL, BS, BD in ((1, 16, 64, 32, 32), (16, 64, 32, 16, 0)):
        both = dict(REP=4, BR=BR, D=256, CHUNK=256, BL=BL, T=T, H=16, PDL=True, CAUSAL=True, WIN=0, DYN=True)
        assert _before_wait(E._attn_split_kernel, sig, both | dict(IEEE=False, PREFETCH=False), 'ld.global')[1] > 0
        assert _before_wait(E._attn_combine_kernel, csig, both | dict(GATE=True, PS=16 * 512 + 2 * 4 * 256, BS=BS, BD=BD), 'ld.global')[1] > 0
