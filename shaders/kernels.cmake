# The kernel manifest: every compute kernel vkformer builds, one line per family.
#   vkf_kernel(<family> <source> [DTYPES f32 f16] [DEFINES NAME=VALUE ...] [REQUIRES feature ...])
# The family name becomes vkformer::kernels::Kernel::<family>; one SPIR-V variant per dtype.
# Features: fp16_arith storage_16bit subgroup_arith coopmat_nv coopmat_khr (f16 implies
# storage_16bit).

vkf_kernel(unary          unary.comp          DTYPES f32 f16)
vkf_kernel(add            add.comp            DTYPES f32 f16)
vkf_kernel(cast           cast.comp           DTYPES f32 f16 REQUIRES storage_16bit)
