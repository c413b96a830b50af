//===- FuzzTensorFiles.cpp - libFuzzer targets: safetensors and .npy ------===//
//
// The readers take paths, so each input is written to an anonymous in-memory
// file (memfd) and read back through /proc/self/fd. A file must open with a
// clear error or yield entries whose reads stay inside the file. Compiled
// twice: ZRT_FUZZ_NPY selects the .npy reader.
//
//===----------------------------------------------------------------------===//

#include "zrt/TensorFile.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("fuzz", MFD_CLOEXEC);
  if (fd < 0)
    return 0;
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0)
      break;
    done += size_t(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
#ifdef ZRT_FUZZ_NPY
  zrt::Expected<zrt::NpyArray> array = zrt::readNpy(path);
  (void)array;
#else
  zrt::Expected<zrt::SafetensorsFile> file = zrt::SafetensorsFile::open(path);
  if (file.isOk()) {
    std::vector<char> buffer;
    for (const zrt::SafetensorsEntry &e : file->entries()) {
      const uint64_t bytes = e.bytes;
      if (bytes > (64u << 20))
        continue; // the header says so; reading it is not the point
      buffer.resize(size_t(bytes));
      // An error is a valid outcome for a malformed file; the fuzzer looks
      // for crashes and sanitizer reports, not for failed reads.
      (void)file->read(e, 0, bytes, buffer.data());
    }
  }
#endif
  close(fd);
  return 0;
}
