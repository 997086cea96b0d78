# The kernel manifest: every compute kernel vkformer builds, one line per family.
#   vkf_kernel(<family> <source> [DTYPES f32 f16] [DEFINES NAME=VALUE ...] [REQUIRES feature ...])
# The family name becomes vkformer::kernels::Kernel::<family>; one SPIR-V variant per dtype.
# Features: fp16_arith storage_16bit subgroup_arith subgroup_shuffle coopmat_nv coopmat_khr
# integer_dot (VK_KHR_shader_integer_dot_product)
# (f16 implies storage_16bit).

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
vkf_kernel(peak_fma       peak_fma.comp       DTYPES f32)
vkf_kernel(peak_copy      peak_copy.comp      DTYPES f32)
vkf_kernel(peak_copy_texel peak_copy.comp     DTYPES f32 DEFINES TEXEL=1)
vkf_kernel(attention_rows attention_rows.comp DTYPES f32 f16)
vkf_kernel(attention_rows_shuffle attention_rows.comp DTYPES f32 f16 DEFINES USE_SHUFFLE=1 REQUIRES subgroup_shuffle)
vkf_kernel(matmul_texel   matmul_texel.comp   DTYPES f32 f16)
vkf_kernel(matmul_split   matmul.comp         DTYPES f32 f16 DEFINES SPLIT_K=1)
vkf_kernel(matmul_reduce  matmul_reduce.comp  DTYPES f32 f16)
vkf_kernel(matmul_gemv    matmul_gemv.comp    DTYPES f32 f16)
# Cooperative matrices (shaders/coopmat.glsl): KHR, NV where only NV exists, and the emulation
# that tests every configuration on any device (chosen only when asked: VKFORMER_COOPMAT=emulate).
vkf_kernel(matmul_coopmat_nv  matmul_coopmat.comp DTYPES f16 DEFINES COOPMAT_NV=1 REQUIRES coopmat_nv fp16_arith)
vkf_kernel(matmul_coopmat_khr matmul_coopmat.comp DTYPES f16 DEFINES COOPMAT_KHR=1 REQUIRES coopmat_khr fp16_arith)
vkf_kernel(matmul_coopmat_emu matmul_coopmat.comp DTYPES f16 DEFINES COOPMAT_EMULATE=1 REQUIRES fp16_arith)
vkf_kernel(attention_rows_texel attention_rows.comp DTYPES f32 f16 DEFINES USE_SHUFFLE=1 TEXEL=1 REQUIRES subgroup_shuffle)
vkf_kernel(attention_rows_texel_rope attention_rows.comp DTYPES f32 f16 DEFINES USE_SHUFFLE=1 TEXEL=1 ROPE_KV=1 REQUIRES subgroup_shuffle)
# ... and the output projection with its residual (a decoding step, src/graph/executor_build.cpp).
vkf_weight_kernels(attention_rows_texel_rope_wo attention_rows.comp WEIGHTS ${VKF_QUANT_TYPES} DTYPES f32 f16
                   DEFINES USE_SHUFFLE=1 TEXEL=1 ROPE_KV=1 OUT_PROJ=1 REQUIRES subgroup_shuffle subgroup_arith)
vkf_kernel(softmax_rows softmax_rows.comp DTYPES f32 f16)
vkf_kernel(softmax_rows_subgroup softmax_rows.comp DTYPES f32 f16 DEFINES USE_SUBGROUP=1 REQUIRES subgroup_shuffle)
vkf_kernel(matmul_transpose matmul_transpose.comp DTYPES f32 f16)
vkf_kernel(layer_norm_add layer_norm.comp DTYPES f32 f16 DEFINES ADD=1)
vkf_kernel(layer_norm_add_subgroup layer_norm.comp DTYPES f32 f16 DEFINES ADD=1 USE_SUBGROUP=1 REQUIRES subgroup_arith)
vkf_kernel(layer_norm_rows layer_norm_rows.comp DTYPES f32 f16)
vkf_kernel(layer_norm_rows_subgroup layer_norm_rows.comp DTYPES f32 f16 DEFINES USE_SUBGROUP=1 REQUIRES subgroup_shuffle)
vkf_kernel(layer_norm_rows_add layer_norm_rows.comp DTYPES f32 f16 DEFINES ADD=1)
vkf_kernel(layer_norm_rows_add_subgroup layer_norm_rows.comp DTYPES f32 f16 DEFINES ADD=1 USE_SUBGROUP=1 REQUIRES subgroup_shuffle)
vkf_kernel(softmax_rows_mask4 softmax_rows.comp DTYPES f32 f16 DEFINES MASK_TEXEL=1)
vkf_kernel(softmax_rows_mask4_subgroup softmax_rows.comp DTYPES f32 f16 DEFINES MASK_TEXEL=1 USE_SUBGROUP=1 REQUIRES subgroup_shuffle)
vkf_kernel(unary_vec4     unary.comp          DTYPES f32 f16 DEFINES VEC4=1)
vkf_kernel(add_vec4       add.comp            DTYPES f32 f16 DEFINES VEC4=1)
vkf_kernel(cast_vec4      cast.comp           DTYPES f32 f16 DEFINES VEC4=1 REQUIRES storage_16bit)
vkf_kernel(pool           pool.comp           DTYPES f32 f16)
vkf_kernel(l2_normalize   l2_normalize.comp   DTYPES f32 f16)
vkf_kernel(rms_norm       rms_norm.comp       DTYPES f32 f16)
vkf_kernel(rms_norm_subgroup rms_norm.comp    DTYPES f32 f16 DEFINES USE_SUBGROUP=1 REQUIRES subgroup_arith)
vkf_kernel(rope           rope.comp           DTYPES f32 f16)
vkf_kernel(rope_kv_cache  rope_kv_cache.comp  DTYPES f32 f16)
# Weights in another dtype than the activations (bf16, ggml blocks, or the other float type),
# dequantized on the fly: one family per weight dtype, one variant per activation dtype. The
# quantized types come from their one list (VKF_QUANT_TYPES, include/vkformer/quant_types.def).
vkf_weight_kernels(matmul_wq      matmul_wq.comp      WEIGHTS f32 DTYPES f16)
vkf_weight_kernels(matmul_wq      matmul_wq.comp      WEIGHTS f16 DTYPES f32)
vkf_weight_kernels(matmul_wq      matmul_wq.comp      WEIGHTS bf16 ${VKF_QUANT_TYPES} DTYPES f32 f16)
vkf_weight_kernels(matmul_wq_gemv matmul_wq_gemv.comp WEIGHTS f32 DTYPES f16)
vkf_weight_kernels(matmul_wq_gemv matmul_wq_gemv.comp WEIGHTS f16 DTYPES f32)
vkf_weight_kernels(matmul_wq_gemv matmul_wq_gemv.comp WEIGHTS bf16 ${VKF_QUANT_TYPES} DTYPES f32 f16)
# CPU devices (texel buffers): quantized weights only.
vkf_weight_kernels(matmul_wq_texel matmul_wq_texel.comp WEIGHTS ${VKF_QUANT_TYPES} DTYPES f32 f16)
vkf_weight_kernels(matmul_wq_vec   matmul_wq_vec.comp   WEIGHTS ${VKF_QUANT_TYPES} DTYPES f32 f16
                   REQUIRES subgroup_shuffle subgroup_arith)
vkf_weight_kernels(matmul_wq_rows  matmul_wq_rows.comp  WEIGHTS ${VKF_QUANT_TYPES} DTYPES f32 f16
                   REQUIRES subgroup_arith)
# Mat-vecs of a few rows on integer dot products (x quantized to 8 bits per block in the kernel).
vkf_weight_kernels(matmul_wq_idot  matmul_wq_idot.comp  WEIGHTS ${VKF_QUANT_TYPES} DTYPES f32 f16
                   REQUIRES integer_dot)
vkf_weight_kernels(embedding_wq    embedding_wq.comp    WEIGHTS bf16 ${VKF_QUANT_TYPES} DTYPES f32 f16)
# Prompt processing on cooperative matrices with weights in their own dtype (matmul_coopmat.comp
# with WEIGHTS: each B chunk dequantized into the f16 stage): KHR, NV, and the emulation.
vkf_weight_kernels(matmul_wq_coopmat_khr matmul_coopmat.comp WEIGHTS bf16 ${VKF_QUANT_TYPES} DTYPES f16
                   DEFINES COOPMAT_KHR=1 WEIGHTS=1 REQUIRES coopmat_khr fp16_arith)
vkf_weight_kernels(matmul_wq_coopmat_nv  matmul_coopmat.comp WEIGHTS bf16 ${VKF_QUANT_TYPES} DTYPES f16
                   DEFINES COOPMAT_NV=1 WEIGHTS=1 REQUIRES coopmat_nv fp16_arith)
vkf_weight_kernels(matmul_wq_coopmat_emu matmul_coopmat.comp WEIGHTS bf16 ${VKF_QUANT_TYPES} DTYPES f16
                   DEFINES COOPMAT_EMULATE=1 WEIGHTS=1 REQUIRES fp16_arith)
vkf_kernel(rms_norm_rows  layer_norm_rows.comp DTYPES f32 f16 DEFINES RMS=1)
vkf_kernel(rms_norm_rows_subgroup layer_norm_rows.comp DTYPES f32 f16 DEFINES RMS=1 USE_SUBGROUP=1 REQUIRES subgroup_shuffle)
# residual + rms_norm(x) (Gemma's post-norms before their residual add), in one dispatch.
vkf_kernel(rms_norm_rows_residual layer_norm_rows.comp DTYPES f32 f16 DEFINES RMS=1 RESIDUAL=1)
vkf_kernel(rms_norm_rows_residual_subgroup layer_norm_rows.comp DTYPES f32 f16 DEFINES RMS=1 RESIDUAL=1 USE_SUBGROUP=1 REQUIRES subgroup_shuffle)
vkf_kernel(rms_norm_residual rms_norm.comp DTYPES f32 f16 DEFINES RESIDUAL=1)
vkf_kernel(rms_norm_residual_subgroup rms_norm.comp DTYPES f32 f16 DEFINES RESIDUAL=1 USE_SUBGROUP=1 REQUIRES subgroup_arith)
# The q/k norms of a packed qkv projection (value heads copied), in one dispatch.
vkf_kernel(rms_norm_qk rms_norm.comp DTYPES f32 f16 DEFINES HEADS=1)
vkf_kernel(rms_norm_qk_subgroup rms_norm.comp DTYPES f32 f16 DEFINES HEADS=1 USE_SUBGROUP=1 REQUIRES subgroup_arith)
vkf_kernel(linear_epilogue linear_epilogue.comp DTYPES f32 f16)
# Flash attention on cooperative matrices (attention_flash.comp: KHR, NV where only NV exists,
# and the emulation, chosen only when asked), and split-K flash decoding (scalar fp32, GPUs).
vkf_kernel(attention_flash_khr attention_flash.comp DTYPES f32 f16 DEFINES COOPMAT_KHR=1 REQUIRES coopmat_khr fp16_arith)
vkf_kernel(attention_flash_nv  attention_flash.comp DTYPES f32 f16 DEFINES COOPMAT_NV=1 REQUIRES coopmat_nv fp16_arith)
vkf_kernel(attention_flash_emu attention_flash.comp DTYPES f32 f16 DEFINES COOPMAT_EMULATE=1 REQUIRES fp16_arith)
vkf_kernel(attention_flash_decode attention_flash_decode.comp DTYPES f32 f16)
vkf_kernel(attention_flash_decode_split attention_flash_decode.comp DTYPES f32 f16 DEFINES SPLIT=1)
vkf_kernel(attention_flash_decode_rope attention_flash_decode.comp DTYPES f32 f16 DEFINES ROPE_KV=1)
vkf_kernel(attention_flash_decode_split_rope attention_flash_decode.comp DTYPES f32 f16 DEFINES ROPE_KV=1 SPLIT=1)
vkf_kernel(attention_flash_combine attention_flash_combine.comp DTYPES f32 f16)
# KV caches in another type than the activations (f32, f16, q8_0, q4_0: shaders/kv_cache_types.glsl,
# the type of each cache a specialization constant): the cache write quantizes, the readers
# dequantize as they load.
vkf_kernel(rope_kv_cache_quant rope_kv_cache_quant.comp DTYPES f32 f16 REQUIRES storage_16bit)
# The attention rotation of quantized caches (Graph::hadamard: the attention output rotated back).
vkf_kernel(hadamard hadamard.comp DTYPES f32 f16)
# The context shift: a cache's rows moved down in place, keys turned by the position change.
vkf_kernel(rope_shift rope_shift.comp DTYPES f32 REQUIRES storage_16bit)
vkf_kernel(attention_rows_kvq attention_rows.comp DTYPES f32 f16 DEFINES KV_QUANT=1)
vkf_kernel(attention_rows_kvq_shuffle attention_rows.comp DTYPES f32 f16 DEFINES KV_QUANT=1 USE_SHUFFLE=1 REQUIRES subgroup_shuffle)
vkf_kernel(attention_kvq attention.comp DTYPES f32 f16 DEFINES KV_QUANT=1)
vkf_kernel(attention_flash_decode_kvq attention_flash_decode.comp DTYPES f32 f16 DEFINES KV_QUANT=1)
vkf_kernel(attention_flash_decode_split_kvq attention_flash_decode.comp DTYPES f32 f16 DEFINES KV_QUANT=1 SPLIT=1)
# Greedy decoding's argmax of the logits (Graph::argmax: 16 bytes read back per token, not the vocabulary).
vkf_kernel(argmax argmax.comp DTYPES f32 f16)
