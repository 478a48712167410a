/* An external C program built against the installed library with pkg-config: validates a
 * package folder's manifest and its compiled program, binds them, and decodes an image (which
 * loads the image module installed beside the library).
 *   validate PACKAGE_DIR PROGRAM_JSON IMAGE */
#include <mlc_manifest/mlc_manifest.h>
#include <mlc_manifest/version.h>
#include <stdio.h>
#include <string.h>

static int report(const char* what, const mlc_errors* errors, int status) {
  size_t i;
  fprintf(stderr, "%s failed: %s\n", what, mlc_status_name(status));
  for (i = 0; i < mlc_errors_count(errors); ++i) {
    mlc_error e;
    mlc_errors_get(errors, i, &e);
    fprintf(stderr, "  [%s] %s %s: %s\n", e.code_name, e.document, e.path, e.message);
  }
  return 1;
}

int main(int argc, char** argv) {
  mlc_package* package;
  mlc_program* program;
  mlc_binding* binding;
  mlc_image* image;
  mlc_image_params params;
  DLTensor tensor;
  int rc;
  if (argc != 4) {
    fprintf(stderr, "usage: validate PACKAGE_DIR PROGRAM_JSON IMAGE\n");
    return 2;
  }
  if (strcmp(mlc_version(), MLC_MANIFEST_VERSION) != 0) {
    fprintf(stderr, "library %s, header %s\n", mlc_version(), MLC_MANIFEST_VERSION);
    return 1;
  }
  package = mlc_package_init();
  program = mlc_program_init();
  binding = mlc_binding_init();
  image = mlc_image_init();
  if ((rc = mlc_package_read(package, argv[1])) != MLC_OK) {
    return report("package", mlc_package_errors(package), rc);
  }
  if ((rc = mlc_program_read(program, argv[2])) != MLC_OK) {
    return report("program", mlc_program_errors(program), rc);
  }
  if ((rc = mlc_bind(binding, package, program, NULL)) != MLC_OK) {
    return report("bind", mlc_binding_errors(binding), rc);
  }
  params = mlc_image_params_default();
  params.height = 8;
  params.width = 8;
  if ((rc = mlc_image_decode_file(image, argv[3], &params)) != MLC_OK) {
    return report("image", mlc_image_errors(image), rc);
  }
  mlc_image_tensor(image, &tensor);
  printf("interface_id %s\nexecutor %s\npair %s\nfunctions %zu\nimage %lldx%lld\n",
         mlc_package_interface_id(package), mlc_binding_executor(binding), mlc_binding_pair(binding),
         mlc_binding_function_count(binding), (long long)tensor.shape[1], (long long)tensor.shape[2]);
  mlc_image_free(image);
  mlc_binding_free(binding);
  mlc_program_free(program);
  mlc_package_free(package);
  return 0;
}
