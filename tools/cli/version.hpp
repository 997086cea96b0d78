#pragma once
// The version the tool writes into its JSON (`devices`, `bench`): the project's, which
// tools/CMakeLists.txt defines; "unknown" for a build that defines none.
#ifndef VKFORMER_VERSION
#define VKFORMER_VERSION "unknown"
#endif
