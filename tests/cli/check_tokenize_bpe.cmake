# cmake -DVKFORMER=<the vkformer tool> -DFETCH=<scripts/fetch_smollm2.sh> -DOUT=<scratch dir>
#       -P check_tokenize_bpe.cmake
# `vkformer tokenize --model FILE.gguf` with SmolLM2-135M-Instruct (fetched by FETCH: a failed
# fetch fails this check with the reason): llama.cpp's ids (as in tests/golden_bpe/smollm2.json)
# and the vocabulary's token strings, special tokens parsed or not, and the errors.
include(${CMAKE_CURRENT_LIST_DIR}/cli_check_util.cmake)
cli_check_start(check_tokenize_bpe.cmake VKFORMER FETCH OUT)

fetch_model(${FETCH} model)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})

# No BOS (SmolLM2's add_bos_token is false); one JSON object per text, in order.
# Beside each byte-level piece, what the token decodes to ("text").
expect(0 "^{\"ids\":\\[19556,28,905,17\\],\"tokens\":\\[\"Hello\",\",\",\"Ġworld\",\"!\"\\],\"text\":\\[\"Hello\",\",\",\" world\",\"!\"\\]}\n{\"ids\":\\[33,34,35\\],\"tokens\":\\[\"1\",\"2\",\"3\"\\],\"text\":\\[\"1\",\"2\",\"3\"\\]}\n$"
       tokenize --model ${model} "Hello, world!" "123")
# <|im_start|> is one control token (id 1) unless --no-parse-special.
expect(0 "^{\"ids\":\\[1,4093,2\\],\"tokens\":\\[\"<\\|im_start\\|>\",\"user\",\"<\\|im_end\\|>\"\\],\"text\":\\[\"<\\|im_start\\|>\",\"user\",\"<\\|im_end\\|>\"\\]}\n$"
       tokenize --model ${model} "<|im_start|>user<|im_end|>")
expect(0 "^{\"ids\":\\[([0-9]+,)+[0-9]+\\],\"tokens\":\\[\"<\",[^\n]*\\]}\n$"
       tokenize --model ${model} --no-parse-special "<|im_start|>user<|im_end|>")
# Lines of a file.
file(WRITE ${OUT}/texts.txt "Hello, world!\n123\n")
expect(0 "^{\"ids\":\\[19556,28,905,17\\][^\n]*}\n{\"ids\":\\[33,34,35\\][^\n]*}\n$"
       tokenize --model ${model} --file ${OUT}/texts.txt)
# Errors name what is wrong.
file(WRITE ${OUT}/broken.gguf "GGUF")
expect(1 "broken\\.gguf" tokenize --model ${OUT}/broken.gguf "x")
expect(2 "max-length applies to WordPiece" tokenize --model ${model} --max-length 4 "x")
expect(1 "no-such\\.gguf" tokenize --model ${OUT}/no-such.gguf "x")
