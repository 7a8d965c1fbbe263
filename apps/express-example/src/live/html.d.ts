// tsup bundles `.html` files as text (`--loader .html=text`, see package.json).
declare module '*.html' {
  const text: string;
  export default text;
}
