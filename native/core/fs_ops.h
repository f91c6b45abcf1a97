// What the fs_ops_*.cc files share: the core's file-system operations, one function per
// operation, grouped by what they act on (fs_ops_names.cc: names and listings; fs_ops_attrs.cc:
// attributes, link targets, xattrs; fs_ops_files.cc: opens, handles and their I/O). Each takes
// the layer its request resolved (see overlay.h), holds that layer's lock only for the tree
// work, does content work under the file's own content lock, and returns 0 or an errno from one
// place.
//
// Paths: an operation names its path parameter `asked` and, once it holds the layer's lock,
// works on `path = canon(L, asked, ...)`, which is `asked` itself unless names are matched
// ignoring case (overlay.h, NameMatch). Creating operations pass `respellAs` too, and give a new
// entry the caller's spelling when it took the place of a deletion spelt otherwise.
#pragma once

#include <memory>

#include "model.h"

// The layer a call acts on: the one given, or the active one (kept alive for the call).
#define SFS_AT(view)                              \
  syncKernelWrites();                             \
  std::shared_ptr<Layer> hold_;                   \
  if (!(view)) hold_ = current(nullptr);          \
  Layer& L = (view) ? *(view) : *hold_;
