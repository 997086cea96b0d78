# cmake -DVKFORMER=<the vkformer tool> -DFETCH=<scripts/fetch_minilm.sh> -DGOLDEN=<tests/golden>
#       -DOUT=<scratch dir> -P check_embed.cmake
# `vkformer embed` and `vkformer tokenize` with all-MiniLM-L6-v2 (fetched by FETCH: a failed fetch
# fails this check with the reason): exact tokenizer output, semantic-search ranking, the .npy
# and JSON outputs, and the errors for bad input.
include(${CMAKE_CURRENT_LIST_DIR}/cli_check_util.cmake)
cli_check_start(check_embed.cmake VKFORMER FETCH GOLDEN OUT)

fetch_model(${FETCH} model)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})

# Hugging Face tokenizers' ids for these texts (tests/golden/tokenizer has the same rules).
expect(0 "^{\"ids\":\\[101,7592,1010,2088,999,102\\],\"tokens\":\\[\"\\[CLS\\]\",\"hello\",\",\",\"world\",\"!\",\"\\[SEP\\]\"\\]}\n$"
       tokenize --model ${model} "Hello, world!")
file(WRITE ${OUT}/texts.txt "Café\r\nA man is eating food.\nThe stock market fell sharply.\n")
expect(0 "^{\"ids\":\\[101,7668,102\\],\"tokens\":\\[\"\\[CLS\\]\",\"cafe\",\"\\[SEP\\]\"\\]}\n{\"ids\":\\[101,1037,2158,2003,5983,2833,1012,102\\][^\n]*}\n{[^\n]*}\n$"
       tokenize --model ${model} --file ${OUT}/texts.txt)

# Semantic search: the meal sentence first, with a cosine near 0.69.
expect(0 "(^|\n)0\\.6[89][0-9]*  A man is eating food\\.\n0\\.[0-9]+  Caf"
       embed --model ${model} --query "Someone is having a meal." "A man is riding a horse."
       --file ${OUT}/texts.txt)
expect(0 "(^|\n)\\[{\"index\":1,\"score\":0\\.6[89][0-9]*,\"text\":\"A man is eating food\\.\"}\\]\n"
       embed --model ${model} --query "Someone is having a meal." --json --top 1 --file ${OUT}/texts.txt)
expect(0 "\\[-?[0-9][-0-9.e,]*\\]\n" embed --model ${model} "one text")
string(REGEX MATCH "\\[[^]]*\\]" last_json "${last_output}")  # the printed vector
string(REGEX MATCHALL "," commas "${last_json}")
list(LENGTH commas n)
if(NOT n EQUAL 383)
  message(SEND_ERROR "embed \"one text\": ${n} commas in its JSON array, expected 383 (384 numbers)")
endif()
expect(0 "3 text\\(s\\), 384 dimensions, mean pooling, normalized"
       embed --model ${model} --output ${OUT}/e.npy --file ${OUT}/texts.txt)
if(NOT EXISTS ${OUT}/e.npy)
  message(SEND_ERROR "embed --output ${OUT}/e.npy wrote nothing")
else()
  file(SIZE ${OUT}/e.npy size)
  if(NOT size EQUAL 4736)  # 128-byte header + 3 x 384 float32
    message(SEND_ERROR "embed --output: ${size} bytes, expected 4736 for [3, 384] float32")
  endif()
endif()

# Bad input: clear errors, exit status 2 for the command line, 1 for the rest (README).
expect(2 "vkformer: error: no texts" embed --model ${model})
string(ASCII 255 byte_ff)  # never valid in UTF-8
file(WRITE ${OUT}/bad.txt "fine\nbad ${byte_ff} byte\n")
expect(1 "vkformer: error: line 2 of --file .*bad.txt is not valid UTF-8" embed --model ${model} --file ${OUT}/bad.txt)
expect(1 "vkformer: error: --model: '${OUT}/nowhere' does not exist" embed --model ${OUT}/nowhere x)
expect(2 "vkformer: error: --model .* is a PyTorch-shaped model directory.*'embed' takes a BERT"
       embed --model ${GOLDEN}/encoder_post_relu_b1_s1 x)
file(MAKE_DIRECTORY ${OUT}/no_model_type)
file(WRITE ${OUT}/no_model_type/config.json "{\"hidden_size\": 4}")
expect(1 "vkformer: error: .*\"model_type\": missing" embed --model ${OUT}/no_model_type x)
expect(1 "vkformer: error: .*no-such-file" tokenize --model ${model} --file ${OUT}/no-such-file)
expect(2 "vkformer: error: .*--model" embed "no model")
