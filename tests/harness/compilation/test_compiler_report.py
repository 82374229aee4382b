from harness.compilation.compiler_report import parse_ptxas_report

# Recorded from nvcc 13.0 (`-Xptxas -v`, sm_90) on two kernels.
PTXAS_LOG = """
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z11relu_kernelPKfPfl' for 'sm_90'
ptxas info    : Function properties for _Z11relu_kernelPKfPfl
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 376 bytes cmem[0]
ptxas info    : Compiling entry function '_Z10tiled_gemmPKfS0_Pfi' for 'sm_90'
ptxas info    : Function properties for _Z10tiled_gemmPKfS0_Pfi
    16 bytes stack frame, 24 bytes spill stores, 20 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 8192 bytes smem, 380 bytes cmem[0]
"""


def test_parses_registers_shared_memory_and_spills_per_kernel() -> None:
    relu, gemm = parse_ptxas_report(PTXAS_LOG)
    assert relu == {"kernel": "relu_kernel", "mangled": "_Z11relu_kernelPKfPfl", "arch": "sm_90", "stack_bytes": 0,
                    "spill_store_bytes": 0, "spill_load_bytes": 0, "registers": 32, "shared_bytes": 0}
    assert (gemm["kernel"], gemm["registers"], gemm["shared_bytes"]) == ("tiled_gemm", 255, 8192)
    assert (gemm["spill_store_bytes"], gemm["spill_load_bytes"], gemm["stack_bytes"]) == (24, 20, 16)


def test_empty_log_has_no_kernels() -> None:
    assert parse_ptxas_report("") == []


def test_a_native_cuda_build_records_its_kernels_resources(tmp_path) -> None:
    """Real (native) CUDA builds pass -Xptxas -v too: their ninja log is parsed like compile-only's."""
    from harness.compilation.build_service import _native_status
    from harness.isolation.sandbox import ChildOutcome

    (tmp_path / "ext.so").write_bytes(b"\x7fELF")
    status = _native_status(tmp_path, "ext.so", ChildOutcome(returncode=0, wall_s=1.0), "[1/3] nvcc ...\n" + PTXAS_LOG,
                            python_module=True)
    assert status["ok"] and [k["registers"] for k in status["resources"]] == [32, 255]
    cpu = _native_status(tmp_path, "ext.so", ChildOutcome(returncode=0, wall_s=1.0), "[1/2] c++ ...", True)
    assert cpu["ok"] and cpu["resources"] is None
