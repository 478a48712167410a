// The SentencePiece module (libmlc_manifest_sentencepiece.so): a SentencePieceProcessor behind
// the plain C table of text/sp_backend.h. The SentencePiece tokenizer (text/sp_tokenizer.cc)
// opens it when it loads a tokenizer.model, so no other command loads libsentencepiece or
// protobuf-lite. Nothing is thrown across the table: every entry catches and reports.
#include <sentencepiece_processor.h>

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "text/sp_backend.h"

struct MlcSpProcessor {
  sentencepiece::SentencePieceProcessor sp;
};

namespace {

void SetError(MlcSpError* error, std::string_view text) {
  if (error) {
    std::snprintf(error->message, sizeof error->message, "%.*s", static_cast<int>(text.size()), text.data());
  }
}

// Runs body (returning 1 or 0), turning an exception into 0 with its reason.
template <class Body>
int Guarded(MlcSpError* error, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    SetError(error, e.what());
  } catch (...) {
    SetError(error, "unknown failure");
  }
  return 0;
}

MlcSpProcessor* Load(const void* model, size_t size, MlcSpError* error) {
  MlcSpProcessor* processor = nullptr;
  Guarded(error, [&] {
    auto* p = new MlcSpProcessor;
    const auto status = p->sp.LoadFromSerializedProto(std::string_view(static_cast<const char*>(model), size));
    if (!status.ok()) {
      SetError(error, status.message());
      delete p;
      return 0;
    }
    processor = p;
    return 1;
  });
  return processor;
}

void Destroy(MlcSpProcessor* processor) { delete processor; }

int32_t PieceCount(const MlcSpProcessor* processor) { return processor->sp.GetPieceSize(); }

int Encode(const MlcSpProcessor* processor, const char* text, size_t size, MlcSpIdsSink sink, void* context,
           MlcSpError* error) {
  return Guarded(error, [&] {
    std::vector<int> ids;
    const auto status = processor->sp.Encode(std::string_view(text, size), &ids);
    if (!status.ok()) {
      SetError(error, status.message());
      return 0;
    }
    static_assert(sizeof(int) == sizeof(int32_t));
    sink(context, reinterpret_cast<const int32_t*>(ids.data()), ids.size());
    return 1;
  });
}

int Decode(const MlcSpProcessor* processor, const int32_t* ids, size_t count, MlcSpTextSink sink, void* context,
           MlcSpError* error) {
  return Guarded(error, [&] {
    const std::vector<int> list(ids, ids + count);
    std::string text;
    const auto status = processor->sp.Decode(list, &text);
    if (!status.ok()) {
      SetError(error, status.message());
      return 0;
    }
    sink(context, text.data(), text.size());
    return 1;
  });
}

int32_t PieceToId(const MlcSpProcessor* processor, const char* piece, size_t size) {
  int32_t id = -1;
  Guarded(nullptr, [&] {
    id = processor->sp.PieceToId(std::string_view(piece, size));
    return 1;
  });
  return id;
}

int IdToPiece(const MlcSpProcessor* processor, int32_t id, MlcSpTextSink sink, void* context) {
  return Guarded(nullptr, [&] {
    if (id < 0 || id >= processor->sp.GetPieceSize()) return 0;
    const std::string& piece = processor->sp.IdToPiece(id);
    sink(context, piece.data(), piece.size());
    return 1;
  });
}

constexpr MlcSpBackend kBackend = {MLC_SP_BACKEND_ABI, Load, Destroy, PieceCount, Encode, Decode, PieceToId,
                                   IdToPiece};

}  // namespace

// The module's one exported symbol (base/module_loader.h), which LoadModule looks up after dlopen.
MLC_MODULE_ENTRY(sentencepiece, MlcSpBackend) {
  return &kBackend;
}
