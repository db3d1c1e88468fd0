"""Looking closer at one kernel with NVIDIA's tools, in processes of their own: Nsight Compute
profiles, compute-sanitizer, Proton sections.
"""
