// What a layer changed relative to the folder (for `changes`, diffs and apply-back), and what
// it costs in memory.
#include <cerrno>

#include "model.h"
#include "path.h"

namespace shadowfs {

void Overlay::layerPaths(const Layer& L, std::vector<std::string>* out) {
  struct Walk {
    static void run(const Node* n, const std::string& base, std::vector<std::string>* out) {
      for (const Node* c : n->kids()) {
        std::string p = joinPath(base, c->name());
        out->push_back(p);
        run(c, p, out);
      }
    }
  };
  Walk::run(L.root.get(), std::string(), out);
}

int Overlay::changes(const std::string& layer, std::vector<Change>* out) {
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  ReadLock lock(lp->mu, LockRank::Layer);
  struct Walk {
    Overlay* self;
    const Layer* layer;
    std::vector<Change>* out;
    void run(const Node* n, const std::string& base, bool lv, const std::string& low) {
      for (const Node* c : n->kids()) {
        const std::string_view name = c->name();
        std::string path = joinPath(base, name);
        // Masked paths are not the agent's to show, in diffs and checkpoints included.
        if (self->masked(*layer, path)) continue;
        std::string natural = lv ? joinPath(low, name) : std::string();
        Attr la;
        const bool present = lv && self->lower_->stat(natural, &la) == 0;
        if (c->whiteout()) {
          if (present) out->push_back({path, Change::Kind::Deleted, la.type, std::nullopt, std::nullopt});
          continue;
        }
        const Inode* in = c->inode();
        if (in->type == FileType::Directory) {
          bool clv = lv;
          std::string clow = low;
          descendInto(c, name, &clv, &clow);
          const bool own = in->ownMeta();
          std::optional<std::string> origin;
          if (c->redirected()) origin = *c->mo()->redirect;
          if (!present) {
            out->push_back({path, Change::Kind::Added, in->type, std::nullopt, origin});
          } else if (la.type != FileType::Directory || c->opaque() || c->redirected()) {
            out->push_back({path, Change::Kind::Modified, in->type, std::nullopt, origin});
          } else if (own) {
            out->push_back({path, Change::Kind::Metadata, in->type, std::nullopt, origin});
          }
          run(c, path, clv, clow);
          continue;
        }
        std::optional<std::string> lowerPath;
        std::optional<Base> baseOf;
        {
          MetaLock m(in->mmu(), LockRank::Meta);
          std::string lp;
          if (in->lowerPath(&lp)) lowerPath = std::move(lp);
          baseOf = in->base();
        }
        Change::Kind k;
        if (!present) {
          k = Change::Kind::Added;
        } else if (la.type != in->type) {
          k = Change::Kind::Modified;
        } else if (lowerPath && *lowerPath == natural) {
          k = Change::Kind::Metadata;
        } else if (in->type == FileType::Symlink) {
          std::string t;
          self->lower_->readlink(natural, &t);
          k = t == in->target() && in->ino == la.ino ? Change::Kind::Metadata
                                                   : Change::Kind::Modified;
        } else {
          k = Change::Kind::Modified;
        }
        std::optional<std::string> origin;
        if (lowerPath && *lowerPath != path) origin = lowerPath;
        out->push_back({path, k, in->type, baseOf, origin});
      }
    }
  };
  Walk w{this, lp.get(), out};
  w.run(lp->root.get(), std::string(), true, std::string());
  return 0;
}

// What the layer costs: every allocation the model makes for it, as the allocator rounds it
// (memory_test checks this against glibc's own count), plus the contents held in memory.
int Overlay::setMask(const std::string& layer, const std::vector<std::string>& globs) {
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  auto m = std::make_shared<const PathMask>(globs, ignoreCase_);
  WriteLock lock(lp->mu, LockRank::Layer);
  lp->mask = m->empty() ? nullptr : std::move(m);
  return 0;
}

int Overlay::mask(const std::string& layer, std::vector<std::string>* out) {
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  ReadLock lock(lp->mu, LockRank::Layer);
  out->clear();
  if (lp->mask) *out = lp->mask->globs();
  return 0;
}

int Overlay::stats(const std::string& layer, LayerStats* out) {
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  ReadLock lock(lp->mu, LockRank::Layer);
  struct Walk {
    static void run(const Node* n, LayerStats* st) {
      for (const Node* c : n->kids()) {
        st->paths++;
        st->memoryBytes += c->footprint(&st->spilledBytes);
        run(c, st);
      }
    }
  };
  *out = LayerStats{};
  Walk::run(lp->root.get(), out);
  for (const auto& [path, entry] : lp->copied)
    out->memoryBytes += mallocChunk(sizeof(void*) * 2 + sizeof(path) + sizeof(entry) + 8) +
                        (path.size() > 15 ? mallocChunk(path.size() + 1) : 0);
  return 0;
}

}  // namespace shadowfs
