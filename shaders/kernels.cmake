# The kernel manifest: every compute kernel vkformer builds, one line per family.
#   vkf_kernel(<family> <source> [DTYPES f32 f16] [DEFINES NAME=VALUE ...] [REQUIRES feature ...])
# The family name becomes vkformer::kernels::Kernel::<family>; one SPIR-V variant per dtype.
# Features: fp16_arith storage_16bit subgroup_arith coopmat_nv coopmat_khr (f16 implies
# storage_16bit).

vkf_kernel(unary          unary.comp          DTYPES f32 f16)
vkf_kernel(add            add.comp            DTYPES f32 f16)
vkf_kernel(cast           cast.comp           DTYPES f32 f16 REQUIRES storage_16bit)
vkf_kernel(heads          heads.comp          DTYPES f32 f16)
vkf_kernel(heads_vec4     heads.comp          DTYPES f32 f16 DEFINES VEC4=1)
vkf_kernel(layer_norm     layer_norm.comp     DTYPES f32 f16)
vkf_kernel(layer_norm_subgroup layer_norm.comp DTYPES f32 f16 DEFINES USE_SUBGROUP=1 REQUIRES subgroup_arith)
vkf_kernel(embedding      embedding.comp      DTYPES f32 f16)
vkf_kernel(embedding_vec4 embedding.comp      DTYPES f32 f16 DEFINES VEC4=1)
vkf_kernel(positional_encoding positional_encoding.comp DTYPES f32 f16)
vkf_kernel(matmul         matmul.comp         DTYPES f32 f16)
vkf_kernel(softmax          softmax.comp        DTYPES f32 f16)
vkf_kernel(softmax_subgroup softmax.comp        DTYPES f32 f16 DEFINES USE_SUBGROUP=1 REQUIRES subgroup_arith)
vkf_kernel(attention        attention.comp      DTYPES f32 f16)
vkf_kernel(update_cache   update_cache.comp   DTYPES f32 f16)
