#!/usr/bin/env python3
"""Which L2 cache policies the installed Triton writes into the split-K attention's PTX (ATTN_EVICT) and the GDN step
kernel's (GDN_STATE_KEEP), compiled for this GPU: a check that an eviction hint reaches the pipelined (cp.async) loads."""
import re, torch, triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
import effqwen.engine as E
cc = torch.cuda.get_device_capability() if torch.cuda.is_available() else (9, 0)
tgt = GPUTarget('cuda', cc[0] * 10 + cc[1], 32)
sig = dict(q_ptr='*bf16', kc_ptr='*bf16', vc_ptr='*bf16', pos_ptr='*i64', mp_ptr='*fp32', lp_ptr='*fp32', ap_ptr='*fp32', LMAX='i32', NS='i32', scale='fp32')
for ev in (False, True):
    consts = dict(REP=4, BR=16, D=256, CHUNK=256, BL=64, IEEE=False, T=1, H=16, PDL=True, CAUSAL=True, WIN=0, PREFETCH=False, DYN=True, EVICT=ev)
    k = triton.compile(ASTSource(E._attn_split_kernel, sig | {n: 'constexpr' for n in consts}, consts, attrs={(i,): [['tt.divisibility', 16]] for i in range(7)}),
                       target=tgt, options=dict(num_warps=4, num_stages=3))
    ptx = k.asm['ptx']
    print('split EVICT', ev, triton.__version__, sorted(set(re.findall(r'createpolicy[\w.:]*', ptx))), sorted(set(re.findall(r'cp\.async\.[\w.:]*global[\w.:]*', ptx))))
