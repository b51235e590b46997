"""Diagnostic for the Gluon prototypes: resident CTAs per SM (cuOccupancyMaxActiveBlocksPerMultiprocessor) and the time
with the driver's default shared-memory carveout vs the maximum carveout (cuFuncSetAttribute PREFERRED_SHARED_MEMORY_CARVEOUT).

    python scripts/gluon_occupancy.py
"""
import ctypes, json, sys, time
import torch

def cuda():
    lib = ctypes.CDLL('libcuda.so.1'); return lib

def occupancy(kern, threads: int) -> int:
    n = ctypes.c_int(0)
    rc = cuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), ctypes.c_void_p(kern.function), threads, ctypes.c_size_t(kern.metadata.shared))
    if rc: raise RuntimeError(f'cuOccupancyMaxActiveBlocksPerMultiprocessor: CUresult {rc}')
    return n.value

def set_carveout(kern, pct: int):
    rc = cuda().cuFuncSetAttribute(ctypes.c_void_p(kern.function), 9, pct)   # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    if rc: raise RuntimeError(f'cuFuncSetAttribute: CUresult {rc}')

def main():
    import effqwen.gluon as G
    from effqwen import kernels as Kn
    torch.manual_seed(0); out = []
    for N, K, M, kind, WK, D in [(9216, 2560, 1, 'w4', 4, 0), (9216, 2560, 1, 'w4', 4, 2), (4096, 2560, 1, 'w4', 4, 0), (2560, 9216, 1, 'w4', 8, 0),
                                 (9216, 2560, 16, 'w4', 4, 0), (9216, 2560, 1, 'bcq3', 4, 0), (9216, 2560, 1, 'bcq3', 2, 0), (9216, 2560, 1, 'bcq3', 1, 0)]:
        x = torch.randn(M, K, device='cuda').to(torch.bfloat16); y = torch.empty(M, N, device='cuda', dtype=torch.bfloat16)
        if kind == 'w4':
            wp = torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int64).to(torch.int32).cuda()
            s = (torch.rand(N, K // 128, device='cuda') * 0.02 + 0.005).to(torch.bfloat16); w = G.w4_to_fragment(wp)
            f = lambda: G.w4a16_fragment_matmul(x, w, s, (WK, 1, D), out=y)
        else:
            sg = torch.randint(-2**31, 2**31 - 1, (3, N, K // 32), dtype=torch.int64).to(torch.int32).cuda()
            a = (torch.rand(3, N, K // 128, device='cuda') * 0.02 + 0.002).to(torch.bfloat16); w = G.bcq_to_fragment(sg)
            f = lambda: G.bcq_fragment_matmul(x, w, a, (WK, 1), out=y)
        f(); torch.cuda.synchronize()
        ck = G.LAST['kernel']
        r = dict(N=N, K=K, M=M, kind=kind, WK=WK, DEPTH=D, shared=ck.metadata.shared, regs=ck.n_regs, ctas=N // 16,
                 occ_default=occupancy(ck, 32 * WK), us_default=Kn._bench(f, 5))
        set_carveout(ck, 100)
        r.update(occ_max=occupancy(ck, 32 * WK), us_max_carveout=Kn._bench(f, 5))
        set_carveout(ck, -1)
        print(json.dumps(r), flush=True); out.append(r)
    return out

if __name__ == '__main__':
    main()
