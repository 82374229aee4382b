"""Run reports for both run kinds (optimize and sweep): report.html, summary.md and the KernelBench metrics they
print. Pure: records in, text out; nothing here reads the store or runs a kernel."""
