/** @type {import('next').NextConfig} */
const nextConfig = {
  // The workspace packages are consumed from their built dist (turbo builds them first).
  reactStrictMode: true,
};

export default nextConfig;
