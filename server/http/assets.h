#pragma once

// The dashboard's files, embedded into taed at build time by web/embed.py (from web/src and
// uPlot's dist files, which `npm ci` in web/ installs from the pinned lockfile). Nothing is
// fetched at run time. "/" is index.html; every other file is /assets/<name>.<content hash>.<ext>
// and may be cached forever.

#include <string_view>
#include <vector>

namespace tae::http {

struct Asset {
  std::string_view path;
  std::string_view content_type;
  std::string_view body;
  bool immutable = false;  // content-hashed URL
};

// The page's Content-Security-Policy (allows the inline import map by its hash, nothing else
// inline, nothing from elsewhere).
extern const char kContentSecurityPolicy[];

const Asset* FindAsset(std::string_view path);
std::vector<const Asset*> AllAssets();

}  // namespace tae::http
