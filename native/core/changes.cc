// What a layer changed relative to the folder (for `changes`, diffs and apply-back), and what
// it costs in memory.
#include <cerrno>
#include <set>

#include "model.h"
#include "path.h"

namespace shadowfs {

void descendInto(const Node* child, std::string_view name, bool* lv, std::string* low);

void Overlay::layerPaths(const Layer& L, std::vector<std::string>* out) {
  struct Walk {
    static void run(const Node* n, const std::string& base, std::vector<std::string>* out) {
      for (auto& [name, c] : n->children) {
        std::string p = joinPath(base, name);
        out->push_back(p);
        run(c.get(), p, out);
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
    std::vector<Change>* out;
    void run(const Node* n, const std::string& base, bool lv, const std::string& low) {
      for (auto& [name, c] : n->children) {
        std::string path = joinPath(base, name);
        std::string natural = lv ? joinPath(low, name) : std::string();
        Attr la;
        const bool present = lv && self->lower_->stat(natural, &la) == 0;
        if (c->whiteout()) {
          if (present) out->push_back({path, Change::Kind::Deleted, la.type, std::nullopt});
          continue;
        }
        const Inode* in = c->inode.get();
        if (in->type == FileType::Directory) {
          bool clv = lv;
          std::string clow = low;
          descendInto(c.get(), name, &clv, &clow);
          bool own;
          {
            MetaLock m(in->mmu, LockRank::Meta);
            own = in->ownMeta;
          }
          if (!present) {
            out->push_back({path, Change::Kind::Added, in->type, std::nullopt});
          } else if (la.type != FileType::Directory || c->opaque || c->redirect) {
            out->push_back({path, Change::Kind::Modified, in->type, std::nullopt});
          } else if (own) {
            out->push_back({path, Change::Kind::Metadata, in->type, std::nullopt});
          }
          run(c.get(), path, clv, clow);
          continue;
        }
        std::optional<std::string> lowerPath;
        std::optional<Base> baseOf;
        {
          MetaLock m(in->mmu, LockRank::Meta);
          lowerPath = in->lowerPath;
          baseOf = in->base;
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
          k = t == in->target && in->ino == la.ino ? Change::Kind::Metadata
                                                   : Change::Kind::Modified;
        } else {
          k = Change::Kind::Modified;
        }
        out->push_back({path, k, in->type, baseOf});
      }
    }
  };
  Walk w{this, out};
  w.run(lp->root.get(), std::string(), true, std::string());
  return 0;
}

int Overlay::stats(const std::string& layer, LayerStats* out) {
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  ReadLock lock(lp->mu, LockRank::Layer);
  std::set<const Inode*> seen;
  struct Walk {
    static void run(const Node* n, std::set<const Inode*>* seen, LayerStats* st) {
      for (auto& [name, c] : n->children) {
        st->paths++;
        st->memoryBytes += name.size() + sizeof(Node);
        if (c->inode && seen->insert(c->inode.get()).second) {
          const Inode* in = c->inode.get();
          st->memoryBytes += sizeof(Inode) + in->target.size();
          // A file being written or copied up right now is counted by its size; never wait.
          if (in->cmu.try_lock_shared()) {
            st->memoryBytes += in->data.size();
            st->spilledBytes += in->spillSize;
            in->cmu.unlock_shared();
          } else {
            MetaLock m(in->mmu, LockRank::Meta);
            st->memoryBytes += in->lowerPath ? 0 : in->snap.size;
          }
        }
        run(c.get(), seen, st);
      }
    }
  };
  *out = LayerStats{};
  Walk::run(lp->root.get(), &seen, out);
  return 0;
}

}  // namespace shadowfs
