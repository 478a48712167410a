// Compiled-program documents assembled from their parts: tasks, programs, the parameter list and
// the device features they need.
#include "mlc_manifest/package.h"

namespace mlc {

Result<CompiledProgram> AssembleCompiledProgram(const ProgramParts& parts, const ChatConfig* config) {
  Result<ResourceEstimate> estimate = EstimateResources(parts.params, config);
  MLC_RETURN_IF_ERROR(estimate);
  Result<std::string> schema_id = ComputeParameterSchemaId(parts.params);
  MLC_RETURN_IF_ERROR(schema_id);
  Result<std::string> interface_id = ComputeInterfaceId(parts.tasks);
  MLC_RETURN_IF_ERROR(interface_id);
  CompiledProgram program;
  program.interface_id = *interface_id;
  program.parameter_schema_id = *schema_id;
  program.programs = parts.programs;
  program.resources = MakeResources(*estimate, parts.features);
  if (parts.record_kv_state_kind) program.kv_state_kind = KvStateKind(program.programs);
  return program;
}

}  // namespace mlc
