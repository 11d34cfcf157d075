// The store of LibTorch reference times beside the compile cache: entries survive a save and a
// reload under their key, a key changes with each thing a time depends on, and a file that is not
// a store is ignored with a reason rather than trusted or fatal.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "reports/remove_tree.h"
#include "sandbox/torch_time_store.h"

using namespace kg;
namespace fs = std::filesystem;

TEST(torch_time_store, an_entry_survives_save_and_reload_under_its_key) {
  const fs::path dir = fs::temp_directory_path() / "kg-torch-store-test";
  remove_tree(dir);
  const fs::path file = dir / "sub" / "times.json";
  const auto k = torch_time_store::key("abc", "NVIDIA H200", "2.11.0");
  {
    torch_time_store s(file);
    EXPECT_TRUE(s.find(k).is_null());
    std::string why;
    EXPECT_TRUE(s.save(&why)) << why; // nothing new: nothing written
    EXPECT_FALSE(fs::exists(file));
    s.put(k, {{"reference", {{"status", "TIMED"}, {"median_us", 12.5}}}});
    ASSERT_TRUE(s.save(&why)) << why;
  }
  torch_time_store again(file);
  const auto e = again.find(k);
  ASSERT_FALSE(e.is_null());
  EXPECT_EQ(e["reference"]["median_us"].get<double>(), 12.5);
  // Another task file, GPU or LibTorch: another key, no entry.
  EXPECT_TRUE(again.find(torch_time_store::key("abd", "NVIDIA H200", "2.11.0")).is_null());
  EXPECT_TRUE(again.find(torch_time_store::key("abc", "NVIDIA H100", "2.11.0")).is_null());
  EXPECT_TRUE(again.find(torch_time_store::key("abc", "NVIDIA H200", "1.13.1")).is_null());
  remove_tree(dir);
}

TEST(torch_time_store, a_file_that_is_not_a_store_is_ignored_with_a_reason) {
  const fs::path file = fs::temp_directory_path() / "kg-torch-store-bad.json";
  std::ofstream(file) << "{\"entries\": 3";
  std::string why;
  torch_time_store s(file, &why);
  EXPECT_NE(why.find("not a kernelgate.torch_times/1 file"), std::string::npos) << why;
  EXPECT_TRUE(s.find(torch_time_store::key("a", "b", "c")).is_null());
  fs::remove(file);
}
