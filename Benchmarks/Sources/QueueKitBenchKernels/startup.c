/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* Process start-up: what linking QueueKit adds to every start of a C program. */
#define _GNU_SOURCE
#include "qkbench.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <queuekit.h>

extern char **environ;

/* The three programs, built once per run in a scratch directory with the C compiler ($CC, else
 * cc), each with the installed library's directory as RUNPATH so that the loader searches alike:
 *   empty   int main(void) { return 0; }
 *   needed  the same, with QueueKit's own DT_NEEDED list (read from the loaded library)
 *   linked  one call into QueueKit, linked against the installed libqueuekit.so.0 */
static char programs[3][512];
static int built = -1;

static int dt_needed(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    char *flags = data;
    const char *library = qkb_queuekit_library();
    if (library == NULL || info->dlpi_name == NULL || strcmp(info->dlpi_name, library) != 0)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        const char *strtab = NULL;
        for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_STRTAB) strtab = (const char *)d->d_un.d_ptr;
        for (const ElfW(Dyn) *d = dyn; strtab != NULL && d->d_tag != DT_NULL; d++) {
            if (d->d_tag != DT_NEEDED) continue;
            size_t used = strlen(flags);
            snprintf(flags + used, 1024 - used, " -l:%s", strtab + d->d_un.d_val);
        }
        return 1;
    }
    return 0;
}

static int build(void) {
    const char *library = qkb_queuekit_library();
    if (library == NULL) return -1;
    char libdir[512];
    snprintf(libdir, sizeof libdir, "%s", library);
    char *slash = strrchr(libdir, '/');
    if (slash == NULL) return -1;
    *slash = '\0';
    char dir[] = "/tmp/queuekit-startup-XXXXXX";
    if (mkdtemp(dir) == NULL) return -1;
    char needed[1024] = "";
    dl_iterate_phdr(dt_needed, needed);
    const char *cc = getenv("CC") != NULL ? getenv("CC") : "cc";
    static const char *names[3] = {"empty", "needed", "linked"};
    for (int i = 0; i < 3; i++) snprintf(programs[i], sizeof programs[i], "%s/%s", dir, names[i]);
    char command[4096];
    snprintf(command, sizeof command,
             "cd %s && printf 'int main(void) { return 0; }\\n' > empty.c && "
             "printf '#include <queuekit.h>\\nint main(void) { return qk_version_number() == 0; "
             "}\\n' > linked.c && "
             "%s -O2 empty.c -Wl,-rpath,%s -o empty && "
             "%s -O2 empty.c -Wl,-rpath,%s -Wl,--no-as-needed%s -o needed && "
             "%s -O2 linked.c -I%s/../include -L%s -lqueuekit -Wl,-rpath,%s -o linked",
             dir, cc, libdir, cc, libdir, needed, cc, libdir, libdir, libdir);
    int status = system(command);
    if (status != 0)
        fprintf(stderr, "queuekit-bench: building the start-up programs failed: %s\n", command);
    return status == 0 ? 0 : -1;
}

static double spawn_ns(const char *program) {
    char *argv[] = {(char *)program, NULL};
    pid_t pid;
    uint64_t start = qkb_now_ns();
    if (posix_spawn(&pid, program, NULL, NULL, argv, environ) != 0) return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    uint64_t end = qkb_now_ns();
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? (double)(end - start) : -1;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

qkb_sample_t qkb_startup(int which, uint64_t spawns) {
    qkb_sample_t s = {NAN, -1, -1, -1, -1}; /* NAN: the row failed */
    if (built < 0) built = build();
    if (built != 0 || which < 0 || which > 2 || spawns == 0) return s;
    double *times = calloc(spawns, sizeof *times);
    if (times == NULL) return s;
    /* The three programs in turn, so that load from other processes hits them alike. */
    for (uint64_t i = 0; i < spawns; i++) {
        for (int k = 0; k < 3; k++) {
            double t = spawn_ns(programs[(which + 1 + k) % 3]);
            if ((which + 1 + k) % 3 == which) times[i] = t;
        }
        if (times[i] < 0) {
            free(times);
            return s;
        }
    }
    qsort(times, spawns, sizeof *times, compare);
    s.ns_per_op = spawns % 2 ? times[spawns / 2] : (times[spawns / 2 - 1] + times[spawns / 2]) / 2;
    free(times);
    return s;
}
