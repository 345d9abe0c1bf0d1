/*
 * The master's page (lib/mserve/page.html) built into the program: the file's bytes
 * from ndz_http_page to ndz_http_page_end (a NUL follows). The Makefile makes this
 * object depend on the HTML file.
 */

__asm__(".section .rodata\n"
	".global ndz_http_page\n"
	".type ndz_http_page, @object\n"
	"ndz_http_page:\n"
	".incbin \"lib/mserve/page.html\"\n"
	".global ndz_http_page_end\n"
	"ndz_http_page_end:\n"
	".byte 0\n"
	".previous\n");
