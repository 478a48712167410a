// SentencePiece lives in a module of its own (libmlc_manifest_sentencepiece.so,
// src/modules/sentencepiece/): libsentencepiece with its protobuf-lite costs every process about
// 1.5 ms of start-up, while only the commands that load a tokenizer.model need it. This is the
// table the module exports -- plain C: an opaque processor, what a call produces handed to the
// caller's callback (valid during the call), error text in caller-provided buffers -- and the
// loader the SentencePiece tokenizer (text/sp_tokenizer.cc) uses to reach it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/module_loader.h"

extern "C" {

// Bumped whenever the table or a struct it passes changes.
enum { MLC_SP_BACKEND_ABI = 1 };

// What went wrong, NUL-terminated and cut to fit.
typedef struct MlcSpError {
  char message[512];
} MlcSpError;

typedef struct MlcSpProcessor MlcSpProcessor;

// Receive a call's ids or text: called once on success, the data valid only during the call.
typedef void (*MlcSpIdsSink)(void* context, const int32_t* ids, size_t count);
typedef void (*MlcSpTextSink)(void* context, const char* text, size_t size);

typedef struct MlcSpBackend {
  int abi;
  // A processor from a serialized ModelProto (tokenizer.model's bytes); NULL (error set) when the
  // bytes are not one.
  MlcSpProcessor* (*load)(const void* model, size_t size, MlcSpError* error);
  void (*destroy)(MlcSpProcessor* processor);
  // The vocabulary's size (ids are 0 .. count-1).
  int32_t (*piece_count)(const MlcSpProcessor* processor);
  // Encodes UTF-8 text to ids: 1, or 0 on failure (error set, sink not called).
  int (*encode)(const MlcSpProcessor* processor, const char* text, size_t size, MlcSpIdsSink sink,
                void* context, MlcSpError* error);
  // Decodes ids (each within 0 .. count-1) to text: 1, or 0 on failure (error set, sink not called).
  int (*decode)(const MlcSpProcessor* processor, const int32_t* ids, size_t count, MlcSpTextSink sink,
                void* context, MlcSpError* error);
  // The id of a piece (SentencePiece's unknown-piece id when the vocabulary lacks it).
  int32_t (*piece_to_id)(const MlcSpProcessor* processor, const char* piece, size_t size);
  // The piece of an id through sink: 1, or 0 when the id is out of range (sink not called).
  int (*id_to_piece)(const MlcSpProcessor* processor, int32_t id, MlcSpTextSink sink, void* context);
} MlcSpBackend;

}  // extern "C"

// libmlc_manifest_sentencepiece.so, $MLC_MANIFEST_SENTENCEPIECE_MODULE (base/module_loader.h).
MLC_MODULE_TABLE(MlcSpBackend, "sentencepiece", "the SentencePiece module (libsentencepiece)", MLC_SP_BACKEND_ABI);
