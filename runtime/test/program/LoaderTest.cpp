//===- LoaderTest.cpp - .zrt verification and validation -----------------===//
//
// Programs are built as zrt::Program values, serialised with the FlatBuffers
// builder, optionally damaged, and parsed again. Each rejection test checks the
// message a user would see: the file, the entry and what is wrong.
//
//===----------------------------------------------------------------------===//

#include "ProgramWriter.h"

#include "zrt/Bindings.h"
#include "zrt/Kernel.h"
#include "zrt/Program.h"
#include "zrt/CpuBackend.h"

#include "zrt_generated.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

using namespace zrt;
using namespace zrt::test;
using ::testing::HasSubstr;

namespace {

Expected<Program> roundTrip(const Program &p, const KernelTable *kernels = nullptr) {
  std::vector<uint8_t> bytes = serializeProgram(p);
  return parseProgram(bytes.data(), bytes.size(), "model.zrt", kernels);
}

std::string errorOf(const Program &p, const KernelTable *kernels = nullptr) {
  Expected<Program> result = roundTrip(p, kernels);
  EXPECT_FALSE(result.isOk()) << "expected the program to be rejected";
  return result.isOk() ? "" : result.status().message();
}

const KernelTable &cpuKernels() {
  static KernelTable table = [] {
    KernelTable t;
    registerCpuKernels(t);
    return t;
  }();
  return table;
}

TEST(Loader, RoundTripsEveryField) {
  Program p = makeLinearModel(4).program;
  p.instructions[7].ranks = {0, 2};
  p.instructions[7].group = 0; // every member of its group runs it
  p.instructions[7].attrs.set("tag", AttrValue{{7}, {}, ""});
  p.groups.push_back({"evens", {0, 2}});
  p.groups.push_back({"nodes", {0, 1, 2, 3}, 2});
  p.arenas[0].host = true; // a host arena (offload device cpu)
  Expected<Program> q = roundTrip(p, &cpuKernels());
  ASSERT_TRUE(q.isOk()) << q.status().message();
  EXPECT_EQ(q->path, "model.zrt");
  EXPECT_EQ(q->version, kFormatVersion);
  EXPECT_EQ(q->worldSize, 4);
  ASSERT_EQ(q->arenas.size(), 2u);
  EXPECT_EQ(q->arenas[1].name, "activations");
  EXPECT_EQ(q->arenas[1].size, p.arenas[1].size);
  EXPECT_TRUE(q->arenas[0].host);
  EXPECT_FALSE(q->arenas[1].host); // absent from the file: false
  EXPECT_EQ(q->arenas[1].path, "");
  ASSERT_EQ(q->buffers.size(), p.buffers.size());
  EXPECT_EQ(q->buffers[3].shape, (std::vector<int64_t>{6, 5}));
  EXPECT_EQ(q->buffers[6].offset, p.buffers[6].offset);
  ASSERT_EQ(q->globals.size(), 2u);
  ASSERT_TRUE(q->globals[0].shard.has_value());
  EXPECT_EQ(q->globals[0].shard->paddedNumel, 32u);
  EXPECT_EQ(q->globals[0].shard->shardNumel(), 8u);
  EXPECT_FALSE(q->globals[1].shard.has_value());
  EXPECT_EQ(q->streams[1].kind, StreamKind::Comm);
  EXPECT_EQ(q->numEvents, 2u);
  EXPECT_EQ(q->groups[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(q->groups[0].groupSize, 0); // absent from the file: 0
  EXPECT_EQ(q->groups[1].groupSize, 2);
  EXPECT_EQ(q->inputs[0].name, "x");
  EXPECT_EQ(q->outputs[1].name, "y_sum");
  ASSERT_EQ(q->instructions.size(), 8u);
  EXPECT_EQ(q->instructions[0].kind, OpKind::AllGather);
  EXPECT_EQ(q->instructions[1].kind, OpKind::Record);
  EXPECT_EQ(q->instructions[3].kind, OpKind::Kernel);
  EXPECT_EQ(q->instructions[3].loc, "linear/MatMul");
  EXPECT_EQ(q->instructions[7].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(q->instructions[7].attrs.getInt("tag", 0), 7);
  EXPECT_TRUE(q->instructions[7].runsOn(2));
  EXPECT_FALSE(q->instructions[7].runsOn(1));
  EXPECT_FALSE(q->hasInOrderPlan()); // absent from the file
  EXPECT_EQ(q->buffers[6].inOrderOffset, -1);
}

// The in-order plan's fields survive the file, and useInOrderPlan swaps each
// buffer's two offsets (and back), sizing the arena for both plans.
TEST(Loader, RoundTripsAndSwapsTheInOrderPlan) {
  Program p = makeLinearModel(2).program;
  const uint64_t size = p.arenas[1].size;
  const uint64_t main6 = p.buffers[6].offset, main5 = p.buffers[5].offset;
  p.arenas[1].inOrderSize = size + 128; // buffer 6 (y) has 80 bytes
  p.buffers[6].inOrderOffset = int64_t(size); // past the main plan's end
  Expected<Program> q = roundTrip(p, &cpuKernels());
  ASSERT_TRUE(q.isOk()) << q.status().message();
  ASSERT_TRUE(q->hasInOrderPlan());
  EXPECT_EQ(q->arenas[1].inOrderSize, size + 128);
  EXPECT_EQ(q->buffers[6].inOrderOffset, int64_t(size));
  q->useInOrderPlan();
  EXPECT_TRUE(q->inOrderPlanInUse);
  EXPECT_EQ(q->buffers[6].offset, size);
  EXPECT_EQ(q->buffers[6].inOrderOffset, int64_t(main6));
  EXPECT_EQ(q->buffers[5].offset, main5); // -1: the same in both plans
  EXPECT_EQ(q->arenas[1].size, size + 128);
  Status ok = validateProgram(*q, &cpuKernels());
  EXPECT_TRUE(ok.isOk()) << ok.message();
  q->useInOrderPlan(false);
  EXPECT_FALSE(q->inOrderPlanInUse);
  EXPECT_EQ(q->buffers[6].offset, main6);
  EXPECT_EQ(q->buffers[6].inOrderOffset, int64_t(size));
  // An in-order offset beyond both sizes: the validator names the buffer
  // once the plan is in use.
  q->buffers[6].inOrderOffset = int64_t(size + 4096);
  q->useInOrderPlan();
  Status bad = validateProgram(*q, &cpuKernels());
  EXPECT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("lie outside arena 1"), std::string::npos) << bad.message();
}

TEST(Loader, RoundTripsTrainingPrograms) {
  TrainingModel m = makeTrainingModel(2);
  Expected<Program> q = roundTrip(m.program, &cpuKernels());
  ASSERT_TRUE(q.isOk()) << q.status().message();
  ASSERT_TRUE(q->training.has_value());
  EXPECT_EQ(q->training->loss, "loss");
  EXPECT_EQ(q->training->gradNorm, "grad_norm");
  EXPECT_EQ(q->training->lr, "lr");
  EXPECT_EQ(q->training->accumulationSteps, 1);
  EXPECT_EQ(q->training->optimizer, m.program.training->optimizer);
  ASSERT_EQ(q->globals.size(), 4u);
  EXPECT_EQ(q->globals[0].role, GlobalRole::Parameter);
  EXPECT_EQ(q->globals[1].role, GlobalRole::OptimizerState);
  EXPECT_EQ(q->globals[2].role, GlobalRole::OptimizerState);
  EXPECT_EQ(q->globals[3].role, GlobalRole::Counter);
  EXPECT_EQ(countWeightGlobals(*q), 1u);
  // Every attribute kind survives, strings included.
  const Instruction &schedule = q->instructions[q->instructions.size() - 2];
  EXPECT_EQ(schedule.op, "LrSchedule");
  EXPECT_EQ(schedule.attrs.getString("type", ""), "WarmupDecayLR");
  EXPECT_EQ(schedule.attrs.getInt("total_num_steps", 0), 8);
  EXPECT_EQ(schedule.attrs.getFloat("warmup_max_lr", 0), 0.1);
  // A forward program has no training table and only parameters.
  Expected<Program> forward = roundTrip(makeLinearModel(1).program);
  ASSERT_TRUE(forward.isOk());
  EXPECT_FALSE(forward->training.has_value());
  EXPECT_EQ(forward->globals[1].role, GlobalRole::Parameter);
}

TEST(Loader, RejectsBadTrainingTables) {
  TrainingModel m = makeTrainingModel(1);
  Program p = m.program;
  p.training->loss = "";
  EXPECT_EQ(errorOf(p), "model.zrt: training table: names no loss output");
  p = m.program;
  p.training->loss = "nll";
  EXPECT_EQ(errorOf(p), "model.zrt: training table: loss \"nll\" is not an "
                        "output of the program (its outputs: loss, grad_norm, lr)");
  p = m.program;
  p.training->gradNorm = "norm";
  EXPECT_THAT(errorOf(p), HasSubstr("training table: grad_norm \"norm\" is not "
                                    "an output of the program"));
  p = m.program;
  p.buffers[m.lossBuffer].shape = {2};
  p.arenas[1].size += 64;
  EXPECT_THAT(errorOf(p), HasSubstr("training table: loss \"loss\" must be an "
                                    "f32 scalar, but its buffer"));
  EXPECT_THAT(errorOf(p), HasSubstr("is f32[2]"));
  p = m.program;
  p.buffers[m.lossBuffer].dtype = DType::F64;
  EXPECT_THAT(errorOf(p), HasSubstr("must be an f32 scalar"));
  p = m.program;
  p.training->accumulationSteps = 0;
  EXPECT_EQ(errorOf(p), "model.zrt: training table: accumulation_steps 0 is "
                        "not positive");
}

TEST(Loader, RejectsBadGlobalRoles) {
  TrainingModel m = makeTrainingModel(1);
  Program p = m.program;
  p.globals[3].dtype = DType::F32; // the counter
  p.buffers[m.counterBuffer].dtype = DType::F32;
  EXPECT_EQ(errorOf(p), "model.zrt: global 3 \"step\": a Counter global (the "
                        "optimizer step) must be a replicated i64 scalar, got "
                        "f32[scalar]");
  p = m.program;
  p.globals[0].role = GlobalRole(9);
  EXPECT_EQ(errorOf(p), "model.zrt: global 0 \"w\" has unknown role 9 (known: 0-3)");
}

// An fp32 master (widen_from) and a held gradient round-trip; a master that
// is not an f32 OptimizerState of a 16-bit global of its shape is refused,
// naming both globals.
TEST(Loader, ChecksMastersAndHeldGradients) {
  TrainingModel m = makeTrainingModel(1);
  Program p = m.program;
  // Global 0 "w" a bf16 parameter, global 1 its f32 master.
  p.globals[0].dtype = DType::BF16;
  p.buffers[p.globals[0].buffer].dtype = DType::BF16;
  p.globals[0].gradient = HeldGradient{DType::BF16, 7};
  p.globals[1].widenFrom = 0;
  Expected<Program> q = roundTrip(p);
  ASSERT_TRUE(q.isOk()) << q.status().message();
  EXPECT_EQ(q->globals[1].widenFrom, 0);
  EXPECT_EQ(q->globals[0].widenFrom, -1);
  ASSERT_TRUE(q->globals[0].gradient.has_value());
  EXPECT_EQ(q->globals[0].gradient->dtype, DType::BF16);
  EXPECT_EQ(q->globals[0].gradient->numel, 7u);
  EXPECT_FALSE(q->globals[1].gradient.has_value());
  Program bad = p;
  bad.globals[1].widenFrom = 1; // itself: f32, not 16-bit
  EXPECT_THAT(errorOf(bad), HasSubstr("cannot start as global \"" + p.globals[1].name +
                                      "\" (f32["));
  bad = p;
  bad.globals[1].widenFrom = 9;
  EXPECT_THAT(errorOf(bad), HasSubstr("widens from global 9 of 4"));
  bad = p;
  bad.globals[1].role = GlobalRole::Parameter;
  EXPECT_THAT(errorOf(bad), HasSubstr("a Parameter global of f32["));
}

TEST(Loader, RejectsMissingFile) {
  Expected<Program> p = loadProgram("/nonexistent/model.zrt");
  ASSERT_FALSE(p.isOk());
  EXPECT_THAT(p.status().message(),
              HasSubstr("/nonexistent/model.zrt: cannot open program file"));
}

TEST(Loader, RejectsTooShortFile) {
  uint8_t bytes[4] = {1, 2, 3, 4};
  Expected<Program> p = parseProgram(bytes, 4, "model.zrt");
  ASSERT_FALSE(p.isOk());
  EXPECT_EQ(p.status().message(),
            "model.zrt: file too short to be a zrt program (4 bytes)");
}

TEST(Loader, RejectsWrongIdentifier) {
  std::vector<uint8_t> bytes = serializeProgram(makeLinearModel(1).program);
  std::memcpy(bytes.data() + 4, "ONNX", 4);
  Expected<Program> p = parseProgram(bytes.data(), bytes.size(), "model.zrt");
  ASSERT_FALSE(p.isOk());
  EXPECT_EQ(p.status().message(), "model.zrt: not a zrt program (file "
                                  "identifier \"ONNX\", expected \"ZRT1\")");
}

TEST(Loader, RejectsOtherVersion) {
  Program p = makeLinearModel(1).program;
  p.version = 1; // before training programs (Global.role, Program.training)
  EXPECT_EQ(errorOf(p), "model.zrt: program format version 1, this zero-run "
                        "reads version 2; recompile with the matching zero-opt");
  p.version = 3;
  EXPECT_THAT(errorOf(p), HasSubstr("program format version 3"));
  p.version = 0; // a writer that forgot to set it
  EXPECT_THAT(errorOf(p), HasSubstr("program format version 0"));
}

TEST(Loader, RejectsTruncatedFileAtEveryLength) {
  std::vector<uint8_t> bytes = serializeProgram(makeLinearModel(2).program);
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::vector<uint64_t> aligned((len + 7) / 8 + 1);
    std::memcpy(aligned.data(), bytes.data(), len);
    Expected<Program> p = parseProgram(aligned.data(), len, "model.zrt");
    if (p.isOk()) {
      // Only the alignment padding at the very end, which nothing references,
      // may go missing unnoticed.
      EXPECT_GE(len + 8, bytes.size()) << "accepted a file truncated to " << len;
      EXPECT_EQ(p->instructions.size(), 8u);
      continue;
    }
    if (len >= 8)
      EXPECT_THAT(p.status().message(), HasSubstr("model.zrt: ")) << len;
  }
  std::vector<uint64_t> aligned(bytes.size() / 8 + 1);
  std::memcpy(aligned.data(), bytes.data(), bytes.size());
  Expected<Program> half = parseProgram(aligned.data(), bytes.size() / 2, "model.zrt");
  ASSERT_FALSE(half.isOk());
  EXPECT_THAT(half.status().message(), HasSubstr("corrupted or truncated"));
}

TEST(Loader, SurvivesCorruptionOfAnyByte) {
  // Every single-byte corruption must give a verdict, never a crash; most are
  // caught by the verifier, the rest by validation or are harmless (names).
  std::vector<uint8_t> bytes = serializeProgram(makeLinearModel(2).program);
  std::vector<uint64_t> aligned(bytes.size() / 8 + 1);
  int rejected = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t value : {uint8_t(0xff), uint8_t(0x00), uint8_t(0x7f)}) {
      std::memcpy(aligned.data(), bytes.data(), bytes.size());
      reinterpret_cast<uint8_t *>(aligned.data())[i] = value;
      Expected<Program> p =
          parseProgram(aligned.data(), bytes.size(), "model.zrt", &cpuKernels());
      rejected += !p.isOk();
    }
  }
  EXPECT_GT(rejected, int(bytes.size()) / 2);
}

TEST(Loader, RejectsBufferOutsideItsArena) {
  Program p = makeLinearModel(1).program;
  p.buffers[6].offset = p.arenas[1].size - 8;
  EXPECT_THAT(errorOf(p), HasSubstr("model.zrt: buffer 6 \"y\": bytes ["));
  EXPECT_THAT(errorOf(p), HasSubstr("lie outside arena 1 \"activations\""));
  p = makeLinearModel(1).program;
  p.buffers[2].arena = 5;
  EXPECT_EQ(errorOf(p), "model.zrt: buffer 2 \"w.gathered\": arena 5 but the "
                        "program has 2 arenas");
  p = makeLinearModel(1).program;
  p.buffers[2].shape = {-1};
  EXPECT_THAT(errorOf(p), HasSubstr("negative dimension"));
  p = makeLinearModel(1).program;
  p.buffers[2].shape = {int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_THAT(errorOf(p), HasSubstr("too large"));
  p = makeLinearModel(1).program;
  p.buffers[6].offset += 2;
  EXPECT_THAT(errorOf(p), HasSubstr("not a multiple of the element size 4"));
}

TEST(Loader, RejectsUnknownDType) {
  Program p = makeLinearModel(1).program;
  p.buffers[4].dtype = DType(42);
  EXPECT_EQ(errorOf(p), "model.zrt: buffer 4 has unknown dtype 42 (known: 0-8)");
}

TEST(Loader, RejectsOutOfRangeInstructionOperands) {
  Program p = makeLinearModel(1).program;
  p.instructions[3].inputs[1] = 99;
  EXPECT_EQ(errorOf(p), "model.zrt: instruction 3 (MatMul at \"linear/MatMul\"): "
                        "input 1 is buffer 99 but the program has 8 buffers");
  p = makeLinearModel(1).program;
  p.instructions[4].outputs[0] = 8;
  EXPECT_THAT(errorOf(p), HasSubstr("instruction 4 (Add at \"linear/Add\"): "
                                    "output 0 is buffer 8"));
  p = makeLinearModel(1).program;
  p.instructions[4].stream = 2;
  EXPECT_THAT(errorOf(p), HasSubstr("instruction 4 (Add at \"linear/Add\"): "
                                    "stream 2 but the program has 2 streams"));
  p = makeLinearModel(1).program;
  p.instructions[1].event = 2;
  EXPECT_EQ(errorOf(p), "model.zrt: instruction 1 (Record): event 2 but the "
                        "program has 2 events");
  p = makeLinearModel(1).program;
  p.instructions[2].event = -1;
  EXPECT_THAT(errorOf(p), HasSubstr("instruction 2 (Wait): event -1"));
  p = makeLinearModel(2).program;
  p.instructions[0].group = 0;
  EXPECT_THAT(errorOf(p), HasSubstr("instruction 0 (AllGather at \"gather.w\"): "
                                    "process group 0 but the program has 0 groups"));
  p = makeLinearModel(2).program;
  p.instructions[3].ranks = {2};
  EXPECT_THAT(errorOf(p), HasSubstr("runs on rank 2 but the world size is 2"));
}

TEST(Loader, RejectsUnknownKernel) {
  Program p = makeLinearModel(1).program;
  p.instructions[3].op = "FancyMatMul";
  EXPECT_TRUE(roundTrip(p).isOk()) << "without a kernel table any name passes";
  EXPECT_THAT(errorOf(p, &cpuKernels()),
              HasSubstr("model.zrt: instruction 3 (FancyMatMul at "
                        "\"linear/MatMul\"): unknown op \"FancyMatMul\""));
}

TEST(Loader, RejectsBadConstants) {
  Program p = makeLinearModel(1).program;
  p.constants.push_back({1, std::vector<uint8_t>(19)});
  EXPECT_THAT(errorOf(p), HasSubstr("model.zrt: constant 0: 19 bytes of data for "
                                    "buffer 1 \"b\" (f32[5] in arena 0 "
                                    "\"params\" at offset"));
  p.constants[0].data.resize(20);
  EXPECT_TRUE(roundTrip(p).isOk());
  p.constants[0].buffer = 100;
  EXPECT_THAT(errorOf(p), HasSubstr("constant 0: its storage is buffer 100"));
}

TEST(Loader, RejectsInconsistentShardSpecs) {
  Program p = makeLinearModel(4).program;
  p.globals[0].shard->world = 2;
  EXPECT_EQ(errorOf(p), "model.zrt: global 0 \"w\": sharded over 2 ranks but "
                        "the program's world size is 4");
  p = makeLinearModel(4).program;
  p.globals[0].shard->numel = 31;
  EXPECT_THAT(errorOf(p), HasSubstr("shard spec numel 31 but the shape [6x5] has 30"));
  p = makeLinearModel(4).program;
  p.globals[0].shard->paddedNumel = 30;
  EXPECT_THAT(errorOf(p), HasSubstr("padded numel 30 is not a multiple"));
  p = makeLinearModel(4).program;
  p.globals[0].shard->paddedNumel = 36; // valid padding, but the buffer holds 8
  EXPECT_THAT(errorOf(p), HasSubstr("shard of 9 elements but its buffer 0 holds 8"));
  p = makeLinearModel(4).program;
  p.globals[1].dtype = DType::F64;
  EXPECT_THAT(errorOf(p), HasSubstr("global 1 \"b\": dtype f64 but its buffer 1 is f32"));
  p = makeLinearModel(4).program;
  p.globals[1].shape = {6};
  EXPECT_THAT(errorOf(p), HasSubstr("replicated tensor of 6 elements"));
}

TEST(Loader, RejectsMisshapenCollectives) {
  Program p = makeLinearModel(2).program;
  p.instructions[0].outputs = {6}; // y: 20 elements, not 2 x 15
  EXPECT_THAT(errorOf(p),
              HasSubstr("instruction 0 (AllGather at \"gather.w\"): input has 15 "
                        "elements, output 20; AllGather needs output = group "
                        "size x input for a group of 2"));
  p = makeLinearModel(2).program;
  p.instructions[7].outputs = {4};
  EXPECT_THAT(errorOf(p), HasSubstr("AllReduce needs input and output of the same size"));
  p = makeLinearModel(2).program;
  p.instructions[0].stream = 0;
  EXPECT_THAT(errorOf(p), HasSubstr("collectives run on communication streams (a Recv "
                                    "may run on a compute stream), but stream 0 "
                                    "\"compute\" is a compute stream"));
  p = makeLinearModel(2).program;
  p.instructions[7].op = "Broadcast";
  p.instructions[7].kind = OpKind::Broadcast;
  EXPECT_THAT(errorOf(p), HasSubstr("missing integer attribute \"root\""));
  p.instructions[7].attrs.set("root", AttrValue{{2}, {}, ""});
  EXPECT_THAT(errorOf(p), HasSubstr("attribute root = 2 is not a rank of a group of 2"));
  p.instructions[7].attrs.set("root", AttrValue{{1}, {}, ""});
  EXPECT_TRUE(roundTrip(p).isOk());
}

TEST(Loader, RejectsBadGroupsAndBindings) {
  Program p = makeLinearModel(2).program;
  p.groups.push_back({"pair", {0, 0}});
  EXPECT_THAT(errorOf(p), HasSubstr("process group 0 \"pair\": rank 0 appears twice"));
  p.groups[0].ranks = {0, 2};
  EXPECT_THAT(errorOf(p), HasSubstr("rank 2 is outside the world of 2"));
  p = makeLinearModel(2).program;
  p.outputs.push_back({"y", 6});
  EXPECT_THAT(errorOf(p), HasSubstr("output 2 \"y\": the name is used twice"));
}

TEST(Loader, ChecksPartitionedGroups) {
  // [0, 2, 1, 3] in parts of 2: {0, 2} and {1, 3}; collectives are shaped
  // for a part (AllGather of w's 8-element shards: 16 elements, not 32).
  Program p = makeLinearModel(4).program;
  p.groups.push_back({"peers", {0, 2, 1, 3}, 2});
  p.instructions[0].group = 0;
  EXPECT_THAT(errorOf(p),
              HasSubstr("instruction 0 (AllGather at \"gather.w\"): "
                        "input has 8 elements, output 32; AllGather "
                        "needs output = group size x input for a "
                        "group of 2"));
  p.instructions[0].group = -1;
  Expected<Program> q = roundTrip(p);
  ASSERT_TRUE(q.isOk()) << q.status().message();
  EXPECT_EQ(q->groupSize(0), 2);
  EXPECT_EQ(q->groups[0].partOf(2), 0);
  EXPECT_EQ(q->groups[0].partOf(3), 1);
  EXPECT_EQ(q->groups[0].part(1), (std::vector<int>{1, 3}));

  p.groups[0].groupSize = 3;
  EXPECT_EQ(errorOf(p), "model.zrt: process group 0 \"peers\": group_size 3 "
                        "does not divide its 4 ranks into consecutive groups");
  p.groups[0].groupSize = -2;
  EXPECT_EQ(errorOf(p), "model.zrt: process group 0 \"peers\": group_size -2 "
                        "is negative (0 makes one group of all its ranks)");
  p.groups[0] = {"peers", {0, 2, 1, 2}, 2};
  EXPECT_EQ(errorOf(p), "model.zrt: process group 0 \"peers\": rank 2 appears "
                        "twice");
  p.groups[0] = {"peers", {0, 2, 1, 4}, 2};
  EXPECT_EQ(errorOf(p), "model.zrt: process group 0 \"peers\": rank 4 is "
                        "outside the world of 4");
}

TEST(Loader, RejectsCollectivesSkippedByMembersOfTheirGroup) {
  // An AllReduce over the world that only rank 0 runs would leave rank 1's
  // partner waiting forever.
  Program p = makeLinearModel(2).program;
  p.instructions[7].ranks = {0};
  EXPECT_THAT(errorOf(p),
              HasSubstr("instruction 7 (AllReduce at \"sum.y\"): runs only on "
                        "some ranks, but rank 1 of its process group (the "
                        "world) does not run it"));
  // The same on a declared group of rank 0 alone is fine (rank 1 is no member).
  p.groups.push_back({"first", {0}});
  p.instructions[7].group = 0;
  EXPECT_TRUE(roundTrip(p).isOk());
  // A declared group whose member 1 skips it.
  p.groups[0].ranks = {0, 1};
  EXPECT_THAT(errorOf(p), HasSubstr("rank 1 of its process group 0 \"first\" "
                                    "does not run it"));
  // Listing a rank twice, or one outside the world, is a damaged program.
  p = makeLinearModel(2).program;
  p.instructions[3].ranks = {1, 1};
  EXPECT_THAT(errorOf(p), HasSubstr("instruction 3 (MatMul at \"linear/MatMul\"): "
                                    "lists rank 1 twice"));
  p.instructions[3].ranks = {0, 2};
  EXPECT_THAT(errorOf(p), HasSubstr("runs on rank 2 but the world size is 2"));
  // Send and Recv run on their two ranks only, by design.
  p = makeLinearModel(2).program;
  Instruction send = makeInstruction("Send", 1, {7}, {}, "p2p.send");
  send.attrs.set("peer", AttrValue{{1}, {}, ""});
  send.ranks = {0};
  Instruction recv = makeInstruction("Recv", 1, {}, {7}, "p2p.recv");
  recv.attrs.set("peer", AttrValue{{0}, {}, ""});
  recv.ranks = {1};
  p.instructions.push_back(send);
  p.instructions.push_back(recv);
  EXPECT_TRUE(roundTrip(p).isOk()) << errorOf(p);
}

TEST(Loader, ReadsProgramsAtAnyAddress) {
  // From an odd address the loader works on an aligned copy: FlatBuffers
  // would otherwise read 8-byte scalars through misaligned pointers.
  std::vector<uint8_t> bytes = serializeProgram(makeLinearModel(2).program);
  std::vector<uint64_t> storage(bytes.size() / 8 + 2);
  uint8_t *odd = reinterpret_cast<uint8_t *>(storage.data()) + 1;
  std::memcpy(odd, bytes.data(), bytes.size());
  Expected<Program> q = parseProgram(odd, bytes.size(), "model.zrt");
  ASSERT_TRUE(q.isOk()) << q.status().message();
  EXPECT_EQ(q->buffers[3].shape, (std::vector<int64_t>{6, 5}));
  EXPECT_EQ(q->arenas[1].size, makeLinearModel(2).program.arenas[1].size);
  EXPECT_EQ(q->contentHash, hashBytes(bytes.data(), bytes.size()));
}

TEST(Loader, ReadsVectorsOfLongsThatAreOnly4ByteAligned) {
  // The verifier checks only the 4-byte alignment of a vector's length, so a
  // [long] may start at 4 mod 8 after a one-byte change; build such a shape
  // vector on purpose (as 32-bit halves) and check the values read.
  int misaligned = 0;
  for (int pad = 0; pad < 2; ++pad) {
    flatbuffers::FlatBufferBuilder fbb;
    const int64_t shape[2] = {2, 3};
    if (pad) // moves the vector by 4 bytes: one of the two is misaligned
      fbb.PushElement(uint32_t(0));
    fbb.StartVector(4, sizeof(uint32_t));
    for (int i = 1; i >= 0; --i) {
      fbb.PushElement(uint32_t(uint64_t(shape[i]) >> 32));
      fbb.PushElement(uint32_t(uint64_t(shape[i])));
    }
    auto shapeVec = flatbuffers::Offset<flatbuffers::Vector<int64_t>>(
        fbb.EndVector(2));
    auto buffer = fb::CreateBuffer(fbb, fbb.CreateString("b"), fb::DType_F32,
                                   shapeVec, 0, 0);
    auto arena = fb::CreateArena(fbb, fbb.CreateString("a"), 24, 24, 24);
    std::vector<flatbuffers::Offset<fb::Arena>> arenas = {arena};
    std::vector<flatbuffers::Offset<fb::Buffer>> buffers = {buffer};
    auto root = fb::CreateProgram(fbb, kFormatVersion, 1, fbb.CreateVector(arenas),
                                  fbb.CreateVector(buffers));
    fb::FinishProgramBuffer(fbb, root);
    std::vector<uint64_t> aligned(fbb.GetSize() / 8 + 1);
    std::memcpy(aligned.data(), fbb.GetBufferPointer(), fbb.GetSize());
    const auto *fp = fb::GetProgram(aligned.data());
    misaligned += reinterpret_cast<uintptr_t>(
                      fp->buffers()->Get(0)->shape()->Data()) % 8 != 0;
    Expected<Program> q = parseProgram(aligned.data(), fbb.GetSize(), "model.zrt");
    ASSERT_TRUE(q.isOk()) << q.status().message();
    ASSERT_EQ(q->buffers.size(), 1u);
    EXPECT_EQ(q->buffers[0].shape, (std::vector<int64_t>{2, 3}));
  }
  EXPECT_EQ(misaligned, 1);
}

TEST(Loader, RejectsADirectory) {
  std::string dir = ::testing::TempDir();
  Expected<Program> p = loadProgram(dir);
  ASSERT_FALSE(p.isOk());
  EXPECT_EQ(p.status().message(), dir + ": is a directory, not a .zrt program");
}

TEST(EventOrder, AcceptsTheExample) {
  EXPECT_TRUE(checkEventOrder(makeLinearModel(2).program, 0).isOk());
}

TEST(EventOrder, RejectsWaitBeforeRecordOnOneStream) {
  Program p = makeLinearModel(1).program;
  // compute: Wait e1 ... Record e1 on the same stream can never complete.
  p.instructions[2].event = 1;
  Status s = checkEventOrder(p, 0);
  ASSERT_FALSE(s.isOk());
  EXPECT_THAT(s.message(), HasSubstr("linear.zrt: instruction 2 (Wait) on stream 0 "
                                     "\"compute\" waits for event 1"));
  EXPECT_THAT(s.message(), HasSubstr("the program would deadlock"));
}

TEST(EventOrder, RejectsUnrecordedAndDoubleRecordedEvents) {
  Program p = makeLinearModel(1).program;
  p.instructions[1].ranks = {0};
  p.worldSize = 2;
  EXPECT_TRUE(checkEventOrder(p, 0).isOk());
  Status s = checkEventOrder(p, 1); // rank 1 skips the Record
  ASSERT_FALSE(s.isOk());
  EXPECT_THAT(s.message(), HasSubstr("waits for event 0 which no instruction "
                                     "records: the program would deadlock on rank 1"));
  p = makeLinearModel(1).program;
  p.instructions[5].event = 0;
  s = checkEventOrder(p, 0);
  ASSERT_FALSE(s.isOk());
  EXPECT_THAT(s.message(), HasSubstr("instruction 5 (Record): event 0 is already "
                                     "recorded by instruction 1 (Record)"));
}

} // namespace
